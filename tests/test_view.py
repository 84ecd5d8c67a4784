"""`ug.view`: the traced graph as a self-contained HTML page (checked in headless Chromium),
and as DOT / SVG through Graphviz."""

import re
import shutil
import subprocess
import sys

import numpy as np
import pytest

import unigraph as ug


class Net(ug.nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = ug.nn.Linear(3, 2)

    def forward(self, x):
        y = self.fc(x)
        return ug.cond(ug.sum(y) > 0, lambda: ug.relu(y), lambda: -y)


def counter(a, b):
    return ug.while_loop(lambda a, b: a < b, lambda a, b: (a + 2, b + 1), (a, b))


@pytest.fixture
def net():
    ug.manual_seed(0)
    return Net()


X = np.ones((4, 3), np.float32)


def test_html_lists_every_node_parameter_and_source_line(net):
    page = ug.view(net, X)
    graph = ug.function(net).trace(X)
    for node in graph.nodes:
        assert f'data-op="{node.op}"' in page
    assert "fc.weight" in page and "fc.bias" in page
    assert re.search(r"test_view\.py:\d+", page)  # the user's source lines
    assert '<details class="control" open>' in page  # cond bodies are collapsible groups
    assert 'data-name="then"' in page and 'data-name="else"' in page


def test_html_is_self_contained(net):
    page = ug.view(net, X)
    assert "http://" not in page and "https://" not in page
    assert "<script" not in page and "<link" not in page


def test_highlight_marks_the_diverging_node(net):
    graph = ug.function(net).trace(X)
    first = graph.nodes[0].outputs[0].id
    page = ug.view(graph, highlight={first: ("max abs error 3.0e-01", True)})
    assert f'class="node diverging" id="node-{first}"' in page
    assert "max abs error 3.0e-01" in page


def test_view_writes_the_file(tmp_path):
    path = tmp_path / "counter.html"
    text = ug.view(counter, 0, 10, path=path)
    assert path.read_text(encoding="utf-8") == text
    assert 'data-op="while_loop"' in text and 'data-name="body"' in text


def test_dot_and_svg(tmp_path, net):
    dot = ug.view(net, X, format="dot")
    assert "digraph" in dot and "cluster_" in dot and "matmul" in dot
    if shutil.which("dot") is None:
        pytest.fail("Graphviz's dot program is missing: make test installs it (apt graphviz)")
    svg = ug.view(net, X, path=tmp_path / "net.svg", format="svg")
    assert svg.lstrip().startswith("<?xml") or "<svg" in svg[:500]
    assert "matmul" in svg


def test_unknown_format_is_refused(net):
    with pytest.raises(ValueError, match="unknown view format 'png'"):
        ug.view(net, X, format="png")


def chromium() -> str:
    for name in ("chromium", "chromium-browser", "google-chrome"):
        path = shutil.which(name)
        if path:
            return path
    pytest.fail("Chromium is missing: make test installs it (apt chromium)")


def test_page_renders_in_a_real_browser(tmp_path, net):
    path = tmp_path / "net.html"
    graph = ug.function(net).trace(X)
    ug.view(graph, path=path)
    done = subprocess.run(
        [chromium(), "--headless", "--no-sandbox", "--disable-gpu", "--disable-quic",
         "--no-first-run", "--disable-background-networking", "--disable-component-update",
         "--disable-sync", f"--user-data-dir={tmp_path / 'profile'}", "--dump-dom",
         path.as_uri()], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr[-2000:]
    dom = done.stdout
    for node in graph.nodes:  # the browser parsed every node into the document
        assert f'id="node-{node.outputs[0].id}"' in dom
    assert "<details" in dom and "fc.weight" in dom


# -- ONNX files: unigraph's view of the imported graph, and Netron ----------------------------
def _scaled_tanh(x):
    return ug.tanh(x) * 2.0


@pytest.fixture
def onnx_file(tmp_path):
    path = tmp_path / "model.onnx"
    ug.onnx.export(_scaled_tanh, np.ones((2, 3), np.float32), path=path)
    return path


def _free_port() -> int:
    import socket

    with socket.socket() as sock:
        sock.bind(("localhost", 0))
        return sock.getsockname()[1]


def _fetch(url: str) -> bytes:
    import urllib.request

    with urllib.request.urlopen(url, timeout=30) as response:
        assert response.status == 200
        return response.read()


def test_onnx_file_is_drawn_after_import(onnx_file, tmp_path):
    out = tmp_path / "g.html"
    page = ug.view(onnx_file, path=out)
    assert out.read_text(encoding="utf-8") == page
    assert 'data-op="tanh"' in page and 'data-op="mul"' in page
    assert "float32[2, 3]" in page


def test_netron_serves_the_page_and_the_model(onnx_file):
    port = _free_port()
    server = ug.view(onnx_file, netron=True, browse=False, port=port)
    try:
        assert server.url == f"http://localhost:{port}" and server.running
        page = _fetch(server.url + "/").decode("utf-8")
        assert "<html" in page.lower() and "netron" in page.lower()
        assert '<meta name="file" content="/data/model.onnx">' in page
        assert _fetch(server.url + "/data/model.onnx") == onnx_file.read_bytes()
    finally:
        server.stop()
    assert not server.running


def test_netron_command_prints_the_address_and_serves(onnx_file):
    port = _free_port()
    process = subprocess.Popen(
        [sys.executable, "-m", "unigraph.cli", "view", str(onnx_file), "--netron",
         "--no-browser", "--port", str(port)],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        line = process.stdout.readline()
        assert f"at http://localhost:{port} " in line, (line, process.stderr.read())
        assert _fetch(f"http://localhost:{port}/data/model.onnx") == onnx_file.read_bytes()
    finally:
        process.terminate()
        process.wait(timeout=30)


def test_view_command_draws_an_onnx_file(onnx_file, tmp_path):
    out = tmp_path / "g.html"
    done = subprocess.run([sys.executable, "-m", "unigraph.cli", "view", str(onnx_file),
                           "-o", str(out)], capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr
    assert 'data-op="tanh"' in out.read_text(encoding="utf-8")


def test_netron_on_a_missing_file_is_a_clear_error(tmp_path):
    with pytest.raises(ug.UnigraphError, match=r"no such file: .*absent\.onnx"):
        ug.view(tmp_path / "absent.onnx", netron=True, browse=False)
