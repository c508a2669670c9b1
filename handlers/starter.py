"""Pattern 1's handler under its 0.3 module name, for one release (remove in 0.5).

The deployed functions keep the handler string `exactly_once.handlers.starter.handler`
through 0.4: on `pulumi up` the AWS provider updates a function's configuration (its
handler string) before its code, so a new string naming a module the old zip lacks
would fail every invocation between the two calls. 0.5 switches the string to
`exactly_once.handlers.name_dedup.handler`, which the 0.4 zip already holds.
"""

from exactly_once.handlers.name_dedup import handler

__all__ = ["handler"]
