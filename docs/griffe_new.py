"""A griffe extension for the API reference: a class that is built by
``__new__`` alone (``mpsc.channel``, ``create_memory_object_stream``) gets
``__new__``'s parameters as its signature, so its ``:param:`` fields match.

Griffe reads a class's parameters from ``__init__`` only.  Loaded by
mkdocs.yml; excluded from the site.
"""

from __future__ import annotations

from typing import Any

import griffe


class NewAsSignature(griffe.Extension):
    def on_class_members(self, *, cls: griffe.Class, **kwargs: Any) -> None:
        new = cls.members.get("__new__")
        if "__init__" in cls.members or not isinstance(new, griffe.Function):
            return
        params = list(new.parameters)[1:]  # drop cls
        init = griffe.Function(
            "__init__",
            lineno=new.lineno,
            endlineno=new.endlineno,
            parameters=griffe.Parameters(*params),
            returns="None",
        )
        cls.set_member("__init__", init)
