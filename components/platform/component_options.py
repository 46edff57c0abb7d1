"""What a component's own resource options mean for its children.

A component's `provider` reaches its children by inheritance: Pulumi makes it the default of every
child of that package. Its `depends_on` does not: Pulumi makes the component's own registration
wait, and its children are registered at once (pulumi/pulumi#7542). A component hands what it
was told to wait for to the children that must wait, through `waits_for`.
"""

from __future__ import annotations

from collections.abc import Sequence

import pulumi


def waits_for(opts: pulumi.ResourceOptions | None) -> list[pulumi.Resource]:
    """The resources a component's options say it comes after, as a list (none: empty)."""
    depends_on = opts.depends_on if opts is not None else None
    if depends_on is None:
        return []
    if isinstance(depends_on, pulumi.Resource):
        return [depends_on]
    if isinstance(depends_on, Sequence) and all(isinstance(r, pulumi.Resource) for r in depends_on):
        return list(depends_on)
    raise TypeError("a component's depends_on is a resource or a list of resources")
