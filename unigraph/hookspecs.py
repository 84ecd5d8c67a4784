"""Hook specifications of the `unigraph` plugin manager (pluggy, the way pytest uses it).

A plugin is a module registered through the entry-point group `unigraph`; the built-in
backends register exactly like a third-party one would:

    [project.entry-points.unigraph]
    mybackend = "my_package.plugin"
"""

import pluggy

hookspec = pluggy.HookspecMarker("unigraph")
hookimpl = pluggy.HookimplMarker("unigraph")


@hookspec
def unigraph_backends():
    """Return a list of `unigraph.backend.Backend` objects this plugin provides.

    Called once when the plugin manager is first needed. Constructing a backend must not
    import its framework: that happens in `Backend.load()` on first use.
    """
