"""Model files in Netron (the viewer VisualDL embeds), and ONNX files as unigraph's own view.

    server = ug.view("model.onnx", netron=True)       # serves it on localhost, opens a browser
    print(server.url); server.stop()
    unigraph view model.onnx --netron [--no-browser] [--port 8080]
    unigraph view model.onnx -o model.html            # the imported graph, unigraph's HTML

Netron is the `netron` Python package (`pip install netron`): a small HTTP server in a
background thread of this process, serving Netron's page and the model file. Nothing is
fetched from the network; the page runs in whatever browser opens the address.
"""

from __future__ import annotations

import logging
import os
import time

import numpy as np

from unigraph.errors import UnigraphError


class NetronServer:
    """A running Netron server for one model file: `.url`, `.address`, `.stop()`; also a
    context manager that stops it on exit.

    >>> with ug.view("model.onnx", netron=True, browse=False) as server:
    ...     print(server.url)
    http://localhost:8080
    """

    def __init__(self, path: str, address: tuple):
        self.path = path
        self.address = address

    @property
    def url(self) -> str:
        return f"http://{self.address[0]}:{self.address[1]}"

    @property
    def running(self) -> bool:
        return _netron().status(self.address)

    def stop(self, timeout: float = 5.0) -> None:
        """Stop serving; returns once the server thread has ended (netron's own `stop`
        only asks it to)."""
        netron = _netron()
        netron.stop(self.address)
        deadline = time.monotonic() + timeout
        while netron.status(self.address) and time.monotonic() < deadline:
            time.sleep(0.02)

    def wait(self) -> None:
        """Block until Ctrl-C (then stop serving)."""
        _netron().wait()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.stop()

    def __repr__(self):
        state = "serving" if self.running else "stopped"
        return f"NetronServer({self.path!r} at {self.url}, {state})"


def _netron():
    try:
        import netron
    except ImportError:
        raise UnigraphError(
            "viewing in Netron needs the `netron` package: pip install netron "
            "(or open the file at https://netron.app)"
        ) from None
    return netron


def serve_netron(path, port: int | None = None, browse: bool = True,
                 host: str = "localhost") -> NetronServer:
    """Serve the model file `path` (ONNX, or any format Netron reads) with Netron on
    `host:port` (a free port when `port` is None or 0), open it in a browser unless
    `browse=False`, and return the running server.

    >>> server = serve_netron("model.onnx", browse=False); server.url
    'http://localhost:20731'
    """
    path = os.fspath(path)
    if not os.path.isfile(path):
        raise UnigraphError(f"view --netron: no such file: {path!r}")
    netron = _netron()
    # netron logs "Serving ... at ..." through the root logger, configuring it if unset;
    # the address is unigraph's to print, once, in its own words.
    logging.getLogger("netron").setLevel(logging.WARNING)
    address = netron.serve(path, None, address=(host, port or 0), browse=browse)
    return NetronServer(path, tuple(address))


def onnx_example_inputs(model) -> tuple:
    """Zeros of each declared input of an imported ONNX model (unknown dims taken as 1)."""
    from onnx import helper

    initialized = {t.name for t in model.proto.graph.initializer}
    inputs = []
    for value in model.proto.graph.input:
        if value.name in initialized:
            continue
        tensor_type = value.type.tensor_type
        shape = [d.dim_value if d.HasField("dim_value") else 1 for d in tensor_type.shape.dim]
        dtype = helper.tensor_dtype_to_np_dtype(tensor_type.elem_type)
        inputs.append(np.zeros(shape, dtype))
    return tuple(inputs)


def view_onnx(path, out=None, format: str = "html") -> str:
    """Unigraph's view (HTML, SVG or DOT) of an ONNX file, imported with `ug.onnx.load` and
    traced on zeros of its declared input shapes."""
    from unigraph.graph_view import view
    from unigraph.onnx import load

    model = load(os.fspath(path))
    return view(model, *onnx_example_inputs(model), path=out, format=format)
