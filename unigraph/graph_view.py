"""See a traced graph: a self-contained HTML page, or SVG / DOT through Graphviz.

    ug.view(fn, *example_inputs, path="graph.html")        # HTML (no network needed to open)
    ug.view(fn, *example_inputs, path="graph.svg", format="svg")   # needs Graphviz's `dot`
    unigraph view examples/mlp.py -o graph.html

The page lists inputs, parameters (name, shape, dtype) and outputs, then every node in
execution order with its output types, attributes and the user's source line; `cond`,
`while_loop` and `grad` bodies are nested, collapsible groups. `highlight` marks nodes (by
the id of an output value) with a note, which is how a failing check report shows the first
diverging node and each node's error.
"""

from __future__ import annotations

import html
import os

from unigraph.ir import Graph, Node, format_attr, type_string

_STYLE = """
body { font: 14px/1.45 system-ui, sans-serif; margin: 1.5em; color: #222; }
h1 { font-size: 1.3em; } h2 { font-size: 1.1em; margin-top: 1.4em; }
table { border-collapse: collapse; } td, th { padding: 2px 10px; text-align: left; }
th { border-bottom: 1px solid #999; }
.node { font-family: ui-monospace, monospace; padding: 2px 6px; border-left: 3px solid #bbb;
        margin: 2px 0; }
.node .op { font-weight: bold; color: #0b5394; } .node .src { color: #888; float: right; }
.node .attrs { color: #6a1b9a; } .node.highlight { background: #fff3cd; border-color: #e69500; }
.node.diverging { background: #f8d7da; border-color: #c00; }
.note { display: block; color: #a00; font-family: system-ui, sans-serif; }
details.control { margin: 4px 0 4px 0; border-left: 3px solid #0b5394; padding-left: 6px; }
details.control > summary { cursor: pointer; } summary > .node { display: inline-block; }
.subgraph { margin-left: 1.5em; } .subgraph > .title { color: #555; font-style: italic; }
.update, .return { font-family: ui-monospace, monospace; color: #555; padding: 2px 6px; }
"""


def view(fn, *example_inputs, path=None, format: str = "html", highlight: dict | None = None,
         netron: bool = False, browse: bool = True, port: int | None = None):
    """Trace `fn` (a `@ug.function`, a plain function or a Module) on `example_inputs` and
    draw its graph (or draw `fn` itself if it is already a `Graph`). Returns the text (HTML,
    SVG or DOT); writes it to `path` if given.

    `fn` may also be a model file: an `.onnx` path is imported (`ug.onnx.load`) and drawn
    on zeros of its input shapes; with `netron=True` any file Netron reads is served in
    Netron on localhost (`port`, default a free one), opened in a browser unless
    `browse=False`, and the running server (`.url`, `.stop()`) is returned.

    >>> ug.view(model, x, path="model.html")
    >>> server = ug.view("model.onnx", netron=True)
    """
    if isinstance(fn, str | os.PathLike):
        from unigraph import netron_view

        if netron:
            return netron_view.serve_netron(fn, port=port, browse=browse)
        if os.fspath(fn).endswith(".onnx"):
            return netron_view.view_onnx(fn, path, format)
        raise ValueError(f"ug.view: {os.fspath(fn)!r} is not an .onnx file; pass a function "
                         "or Module with example inputs, or netron=True to open a model file "
                         "in Netron")
    graph = fn if isinstance(fn, Graph) else trace_for_view(fn, example_inputs)
    if format == "html":
        text = to_html(graph, highlight)
    elif format == "dot":
        text = to_dot(graph, highlight).source
    elif format == "svg":
        text = render_svg(to_dot(graph, highlight))
    else:
        raise ValueError(f"unknown view format {format!r}; use html, svg or dot")
    if path is not None:
        with open(os.fspath(path), "w", encoding="utf-8") as handle:
            handle.write(text)
    return text


def trace_for_view(fn, example_inputs) -> Graph:
    """The graph `fn` traces to on these inputs (Modules and plain functions wrapped)."""
    from unigraph.function import Function, function

    if not isinstance(fn, Function):
        fn = function(fn, name=getattr(fn, "__name__", type(fn).__name__))
    return fn.trace(*example_inputs)


# -- HTML -----------------------------------------------------------------------------------
def to_html(graph: Graph, highlight: dict | None = None, title: str | None = None) -> str:
    """A self-contained HTML page (inline CSS, no scripts, no external resources)."""
    highlight = highlight or {}
    title = title or f"unigraph: {graph.name}"
    parts = ["<!doctype html>", '<html lang="en"><head><meta charset="utf-8">',
             f"<title>{_e(title)}</title><style>{_STYLE}</style></head><body>",
             f"<h1>{_e(title)}</h1>", _summary(graph), "<h2>Nodes, in execution order</h2>",
             f'<div class="graph" id="graph-{_e(graph.name)}">',
             *_graph_body(graph, highlight), "</div></body></html>"]
    return "\n".join(parts)


def _summary(graph: Graph) -> str:
    rows = [f"<tr><td>input</td><td>%{v.id}</td><td>{_e(v.name)}</td>"
            f"<td>{_e(type_string(v))}</td></tr>" for v in graph.inputs]
    rows += [f'<tr class="param"><td>parameter</td><td>%{v.id}</td><td>{_e(v.name)}</td>'
             f"<td>{_e(type_string(v))}</td></tr>" for v in graph.params]
    rows += [f"<tr><td>output</td><td>%{v.id}</td><td>{_e(v.name)}</td>"
             f"<td>{_e(type_string(v))}</td></tr>" for v in graph.outputs]
    count = _count_nodes(graph)
    return (f"<p>{count} nodes, {len(graph.params)} parameters.</p>"
            "<table><tr><th>role</th><th>value</th><th>name</th><th>type</th></tr>"
            + "".join(rows) + "</table>")


def _count_nodes(graph: Graph) -> int:
    return sum(1 for _ in graph.walk())


def _graph_body(graph: Graph, highlight: dict) -> list:
    lines = []
    for node in graph.nodes:
        line = _node_line(node, highlight)
        if node.subgraphs:
            lines.append(f'<details class="control" open><summary>{line}</summary>')
            for name, sub in node.subgraphs.items():
                inputs = ", ".join(f"%{v.id}: {_e(type_string(v))}" for v in sub.inputs)
                lines.append(f'<div class="subgraph" data-name="{_e(name)}">'
                             f'<div class="title">{_e(name)}({inputs})</div>')
                lines.extend(_graph_body(sub, highlight))
                lines.append("</div>")
            lines.append("</details>")
        else:
            lines.append(line)
    for param, new in graph.updates:
        lines.append(f'<div class="update">update {_e(param.name)} &lt;- %{new.id}</div>')
    returned = ", ".join(f"%{v.id}" for v in graph.outputs)
    lines.append(f'<div class="return">return {returned}</div>')
    return lines


def _node_line(node: Node, highlight: dict) -> str:
    outs = ", ".join(f"%{v.id}: {_e(type_string(v))}" for v in node.outputs)
    args = ", ".join(f"%{v.id}" for v in node.inputs)
    attrs = ", ".join(f"{k}={format_attr(v)}" for k, v in sorted(node.attrs.items()))
    attrs_html = f'<span class="attrs">[{_e(attrs)}]</span>' if attrs else ""
    classes, notes = ["node"], []
    for value in node.outputs:
        if value.id in highlight:
            note, diverging = _note(highlight[value.id])
            classes.append("diverging" if diverging else "highlight")
            notes.append(f'<span class="note">{_e(note)}</span>')
    anchor = node.outputs[0].id if node.outputs else id(node)
    source = f'<span class="src">{_e(node.source)}</span>' if node.source else ""
    return (f'<div class="{" ".join(classes)}" id="node-{anchor}" data-op="{_e(node.op)}">'
            f'{source}{outs} = <span class="op">{_e(node.op)}</span>{attrs_html}({args})'
            f'{"".join(notes)}</div>')


def _note(entry) -> tuple:
    """A highlight entry: a note, or (note, diverging)."""
    if isinstance(entry, tuple):
        return str(entry[0]), bool(entry[1])
    return str(entry), False


def _e(text) -> str:
    return html.escape(str(text), quote=True)


# -- Graphviz -------------------------------------------------------------------------------
def to_dot(graph: Graph, highlight: dict | None = None):
    """A `graphviz.Digraph`: one box per node, edges along values, control-flow bodies as
    clusters. Needs the `graphviz` Python package (`pip install 'unigraph[view]'`)."""
    try:
        import graphviz
    except ImportError:
        raise ImportError("drawing SVG or DOT needs the graphviz package: "
                          "pip install 'unigraph[view]'") from None
    highlight = highlight or {}
    dot = graphviz.Digraph(graph.name, graph_attr={"rankdir": "TB"},
                           node_attr={"shape": "box", "fontname": "monospace",
                                      "fontsize": "10"})
    producers: dict = {}
    _dot_graph(dot, graph, "", producers, highlight)
    return dot


def _dot_graph(dot, graph: Graph, prefix: str, producers: dict, highlight: dict) -> None:
    for value in [*graph.inputs, *graph.params]:
        name = f"{prefix}v{value.id}"
        label = f"{value.name or '%' + str(value.id)}\n{type_string(value)}"
        dot.node(name, label, shape="ellipse" if value in graph.inputs else "cylinder")
        producers[value.id] = name
    for index, node in enumerate(graph.nodes):
        name = f"{prefix}n{index}"
        types = ", ".join(type_string(v) for v in node.outputs)
        label = f"{node.op}\n{types}" + (f"\n{node.source}" if node.source else "")
        style = {}
        if any(v.id in highlight for v in node.outputs):
            style = {"style": "filled", "fillcolor": "#f8d7da"}
        dot.node(name, label, **style)
        for value in node.inputs:
            if value.id in producers:
                dot.edge(producers[value.id], name, label=f"%{value.id}")
        for value in node.outputs:
            producers[value.id] = name
        for sub_name, sub in node.subgraphs.items():
            with dot.subgraph(name=f"cluster_{name}_{sub_name}") as cluster:
                cluster.attr(label=f"{node.op}: {sub_name}", style="dashed")
                _dot_graph(cluster, sub, f"{name}_{sub_name}_", producers, highlight)


def render_svg(dot) -> str:
    """SVG text from a `graphviz.Digraph` (runs Graphviz's `dot` program)."""
    import graphviz

    try:
        return dot.pipe(format="svg").decode("utf-8")
    except graphviz.ExecutableNotFound:
        raise RuntimeError("drawing SVG needs Graphviz's `dot` program on PATH "
                           "(Debian: apt-get install graphviz)") from None
