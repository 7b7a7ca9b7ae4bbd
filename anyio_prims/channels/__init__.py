# Channels on the waiter core: the shared buffer state (_state), the
# endpoints (_endpoints), oneshot (_oneshot) and the anyio drop-in
# (_memory).  The public modules are anyio_prims.mpsc, .spmc, .mpmc,
# .oneshot and .streams; this package holds what they share, and the
# endpoint base classes to annotate with when any flavour will do.
from __future__ import annotations

from ._endpoints import Receiver, Sender
from ._state import ChannelStatistics

__all__ = ["ChannelStatistics", "Receiver", "Sender"]
