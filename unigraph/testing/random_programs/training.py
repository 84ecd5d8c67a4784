"""Random training programs: a small `ug.nn` model, a loss, and 1-3 `ug.optim` steps.

A `Training` is drawn beside the op programs (`strategies.programs`, about one in five):
a `ug.nn.Sequential` of layers that fit the input (Linear, maybe with an `lr_scale`;
Conv2D, MaxPool2D / AvgPool2D / AdaptiveAvgPool2D, Flatten, ReLU / Tanh / Sigmoid,
LayerNorm, BatchNorm2D, GroupNorm, Dropout) and perhaps a custom `ug.nn.Module` with a
Linear child, a LayerNorm child and a parameter of its own; perhaps a frozen parameter
(`trainable = False`: the optimizer skips it); a loss
(`F.cross_entropy` of constant labels, or `F.mse_loss` to a target input); an optimizer
(SGD, Momentum with or without Nesterov, Adam with or without `fused=True`, each with or
without weight decay); and 1-3 steps, each `ug.value_and_grad` with respect to the
optimizer's parameters then `opt.step`: a `@ug.function` step called once per step
("function", so static targets compile it), the same step run eagerly ("eager"), or one
`@ug.function` that runs every step ("unrolled"); a compiled step's `input_spec` may leave
the batch dim open (`Training.open`). A model with BatchNorm2D in training mode
collects its running statistics with `ug.nn.collect_updates` and assigns them after the
gradient (README "Models and training").

The weights are drawn in the program's dtype inside `ug.random.seeded`, so every target
starts from the same bits; the float64 reference runs `model.copy("float64")` of them.
`program(x, ...)` builds the model and optimizer, trains, and returns a dict: each step's
loss, every parameter and buffer after the steps, and every optimizer state slot
(Momentum's velocity; Adam's m, v and its float64 step count). The runner compares them as
it compares any program's outputs; its budget for a training program is the checker's
(`ug.check_training`): the widest budget of the ops applied, times the number of steps.

>>> from hypothesis import find
>>> found = find(trainings(), lambda t: "Adam" in t.optimizer)
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass

from hypothesis import strategies as st

from unigraph.testing.random_programs.model import (
    HEADER,
    INDENT,
    MAIN,
    RANDOM_SEED,
    Input,
    Var,
    _array_literal,
)

STYLES = ["function", "eager", "unrolled"]  # simplest first (hypothesis shrinks toward it)
STEP_DTYPE = "float64"  # Adam's step count, whatever the parameters' dtype


@dataclass
class CustomModule:
    """`Block(n_in, n_out)`: a custom `ug.nn.Module` whose forward is
    `act(norm(inner(x))) * scale [+ x]` (a Linear child; a LayerNorm child and a parameter
    of its own where drawn; the residual where n_in == n_out)."""

    n_in: int
    n_out: int
    act: str  # "relu" | "tanh" | "sigmoid"
    norm: bool
    scale: bool
    residual: bool


@dataclass
class Training:
    """A random training program (see the module docstring). `inputs`: x, and the
    regression target of `F.mse_loss`; `layers`: the Sequential's constructor expressions
    ("Block(...)" is `custom`); `optimizer`: its constructor after `model.parameters()`."""

    dtype: str
    inputs: list
    layers: list
    custom: CustomModule | None
    loss: str  # "cross_entropy" | "mse_loss"
    labels: tuple
    optimizer: str
    steps: int
    style: str
    mode: str  # "train" | "eval"
    init_seed: int
    frozen: str = ""  # a parameter made trainable=False after the model is built
    open: bool = False  # input_spec leaves the batch dim open (styles "function", "unrolled")
    # (a Program's fields: each call after `ug.manual_seed` only; no grad_program, the
    # steps take the gradients; a dict of results)
    seeded = None
    grad_form = ""
    result = "dict"

    # -- what the runner asks of a program ----------------------------------------------
    def needed(self) -> tuple[list, list]:
        return [], list(self.inputs)

    def arrays(self, dtype: str | None = None) -> list:
        dtype = dtype or self.dtype
        return [i.values().astype(self.dtype).astype(dtype) for i in self.inputs]

    @property
    def is_open(self) -> bool:
        return self.open and self.style != "eager"

    def closed(self) -> Training:
        return dataclasses.replace(self, open=False)

    def size(self) -> int:
        return len(self.layers) + self.steps

    @staticmethod
    def output_dtype(name: str) -> str | None:
        """The dtype of the output `name` on every target (None: the program's)."""
        return STEP_DTYPE if name.endswith(".step") else None

    @property
    def batchnorm_updates(self) -> bool:
        """Whether a step collects BatchNorm's running statistics (`collect_updates`)."""
        return self.mode == "train" and any("BatchNorm2D" in layer for layer in self.layers)

    # -- rendering ------------------------------------------------------------------------
    def render(self, title: str = "A random unigraph training program.", targets=(),
               grads: bool = True) -> str:
        lines = [HEADER.format(title=title).rstrip("\n"), "", "F = ug.nn.functional",
                 f'DTYPE = "{self.dtype}"', f"STEPS = {self.steps}", "", ""]
        if self.custom is not None:
            lines += _custom_lines(self.custom) + ["", ""]
        lines += _model_lines(self) + ["", ""] + TRAINED.strip("\n").splitlines() + ["", ""]
        lines += _program_lines(self)
        source = "\n".join(lines) + "\n"
        names = [i.var.name for i in self.inputs]
        source += "\n\n" + "\n".join(
            f"{i.var.name} = {_array_literal(i.values(), self.dtype)}" for i in self.inputs)
        source += f"\ninputs = [{', '.join(names)}]\n"
        if targets:
            source += MAIN.format(targets=list(targets), seed=RANDOM_SEED, ref_grad="",
                                  target_grad="", build="", reference_program="program",
                                  within="", values=".values()")
        return source


TRAINED = '''
def trained(model, opt, losses):
    """What the program returns, by name: each step's loss, every parameter and buffer
    after the steps, and each parameter's optimizer state."""
    out = {f"loss{k}": loss for k, loss in enumerate(losses)}
    for name, param in model.named_parameters():
        out[name] = param
        for slot in opt.slots:
            out[f"{name}.{slot}"] = opt.state(param, slot)
    out.update(model.named_buffers())
    return out
'''


def _custom_lines(custom: CustomModule) -> list:
    pad, body = INDENT, INDENT * 2
    lines = ["class Block(ug.nn.Module):",
             f'{pad}"""A custom module: a Linear child, and what else was drawn."""', "",
             f"{pad}def __init__(self, n_in, n_out):", f"{body}super().__init__()",
             f"{body}self.inner = ug.nn.Linear(n_in, n_out, dtype=DTYPE)"]
    value = "self.inner(x)"
    if custom.norm:
        lines.append(f"{body}self.norm = ug.nn.LayerNorm(n_out, dtype=DTYPE)")
        value = f"self.norm({value})"
    if custom.scale:
        lines.append(f"{body}self.scale = ug.nn.Parameter(np.linspace(0.5, 1.5, n_out)"
                     ".astype(DTYPE))")
    value = f"ug.{custom.act}({value})"
    if custom.scale:
        value += " * self.scale"
    if custom.residual:
        value += " + x"
    return lines + ["", f"{pad}def forward(self, x):", f"{body}return {value}"]


def _model_lines(training: Training) -> list:
    pad = INDENT
    layers = "".join(f"{pad * 3}{layer},\n" for layer in training.layers)
    return ["def make_model():",
            f'{pad}"""The model in DTYPE, its weights drawn from seed {training.init_seed} '
            'on every target."""',
            f"{pad}with ug.random.seeded({training.init_seed}):",
            f"{pad * 2}model = ug.nn.Sequential(\n{layers}{pad * 2})"] + (
        [f"{pad}{training.frozen}.trainable = False  # the optimizer skips it"]
        if training.frozen else []) + [f"{pad}return model"]


def _program_lines(training: Training) -> list:
    pad, body = INDENT, INDENT * 2
    y = "y" if training.loss == "mse_loss" else f"np.array({list(training.labels)})"
    args = "x, y" if training.loss == "mse_loss" else "x"
    lines = [f"def program({args}):",
             f"{pad}model = make_model()",
             f"{pad}if str(x.dtype) != DTYPE:  # the float64 reference: the same weights",
             f"{body}model = model.copy(str(x.dtype))"]
    if training.mode == "eval":
        lines.append(f"{pad}model.eval()")
    lines.append(f"{pad}opt = {training.optimizer.format(params='model.parameters()')}")
    if training.loss == "cross_entropy":
        lines.append(f"{pad}y = {y}")
    lines.append("")
    decorator = "@ug.function"
    if training.is_open:  # the batch dim open while tracing
        specs = [f"ug.Spec({(None, *i.var.shape[1:])!r}, str(x.dtype))"
                 for i in training.inputs]
        if training.loss == "cross_entropy":
            specs.append('ug.Spec((None,), "int64")')
        lines.append(f"{pad}spec = [{', '.join(specs)}]")
        decorator = "@ug.function(input_spec=spec)"
    if training.style == "function":
        lines.append(f"{pad}{decorator}")
    lines.append(f"{pad}def step(x, y):")
    loss = f"F.{training.loss}(model(x), y)"
    if training.batchnorm_updates:
        lines += [f"{body}collected = []", "", f"{body}def closure():",
                  f"{body}{pad}with ug.nn.collect_updates() as updates:",
                  f"{body}{pad * 2}loss = {loss}",
                  f"{body}{pad}collected[:] = updates",
                  f"{body}{pad}return loss, [value for _, value in updates]", "",
                  f"{body}(loss, values), grads = ug.value_and_grad(closure, "
                  "wrt=opt.params)()",
                  f"{body}for (buffer, _), value in zip(collected, values):",
                  f"{body}{pad}ug.assign(buffer, value)"]
    else:
        lines.append(f"{body}loss, grads = ug.value_and_grad(lambda: {loss}, "
                     "wrt=opt.params)()")
    lines += [f"{body}opt.step(grads)", f"{body}return loss", ""]
    if training.style == "unrolled":
        calls = ", ".join(["step(x, y)"] * training.steps)
        lines += [f"{pad}{decorator}", f"{pad}def train(x, y):",
                  f"{body}return [{calls}]", "", f"{pad}losses = train(x, y)"]
    else:
        lines.append(f"{pad}losses = [step(x, y) for _ in range(STEPS)]")
    return lines + [f"{pad}return trained(model, opt, losses)"]


# -- drawing ---------------------------------------------------------------------------------
def _activation(draw) -> str:
    return draw(st.sampled_from(["ReLU", "Tanh", "Sigmoid"]), label="activation")


def _dense_layers(draw, features: int, classes: int) -> tuple[list, CustomModule | None]:
    """Layers over [N, features] ending in `classes` values: Linear (maybe with `act=`),
    activations, LayerNorm, Dropout, and perhaps the custom Block."""
    layers, custom, width = [], None, features
    for _ in range(draw(st.integers(0, 2), label="hidden layers")):
        kind = draw(st.sampled_from(["linear", "activation", "layernorm", "dropout",
                                     "custom"]), label="dense layer")
        if kind == "linear":
            out = draw(st.integers(2, 4))
            act = draw(st.sampled_from(["", ', act="relu"', ', act="tanh"']))
            act += draw(st.sampled_from(["", ", lr_scale=0.5"]), label="lr_scale")
            layers.append(f"ug.nn.Linear({width}, {out}{act}, dtype=DTYPE)")
            width = out
        elif kind == "activation":
            layers.append(f"ug.nn.{_activation(draw)}()")
        elif kind == "layernorm":
            layers.append(f"ug.nn.LayerNorm({width}, dtype=DTYPE)")
        elif kind == "dropout":
            layers.append(f"ug.nn.Dropout({draw(st.sampled_from([0.25, 0.5]))})")
        elif custom is None:
            out = draw(st.integers(2, 4))
            custom = CustomModule(width, out, draw(st.sampled_from(["tanh", "relu",
                                                                    "sigmoid"])),
                                  draw(st.booleans()), draw(st.booleans()),
                                  out == width and draw(st.booleans()))
            layers.append(f"Block({width}, {out})")
            width = out
    layers.append(f"ug.nn.Linear({width}, {classes}, dtype=DTYPE)")
    return layers, custom


def _conv_layers(draw, channels: int, size: int) -> tuple[list, int]:
    """Conv2D (padding, stride), maybe BatchNorm2D, an activation, maybe a pool, then
    Flatten: (layers, the flattened width)."""
    out = draw(st.integers(1, 3))
    kernel = draw(st.integers(1, min(3, size)))
    padding = draw(st.integers(0, kernel // 2))
    stride = draw(st.integers(1, 2))
    size = (size + 2 * padding - kernel) // stride + 1
    norm = draw(st.sampled_from(["", "batch", "group"]), label="conv norm")
    groups = draw(st.sampled_from([g for g in (1, 2, 3) if out % g == 0]))
    # A norm of each channel alone takes its mean away: the conv's bias would get a
    # gradient of 0 plus rounding, whose sign Adam makes a whole step (convs before
    # BatchNorm have none, as usual).
    bias = ", bias=False" if norm == "batch" or (norm == "group" and groups == out) else ""
    layers = [f"ug.nn.Conv2D({channels}, {out}, {kernel}, stride={stride}, "
              f"padding={padding}{bias}, dtype=DTYPE)"]
    if norm == "batch":
        layers.append(f"ug.nn.BatchNorm2D({out}, dtype=DTYPE)")
    elif norm == "group":
        layers.append(f"ug.nn.GroupNorm({groups}, {out}, dtype=DTYPE)")
    layers.append(f"ug.nn.{_activation(draw)}()")
    pool = draw(st.sampled_from(["", "MaxPool2D", "AvgPool2D", "AdaptiveAvgPool2D"]),
                label="pool")
    if pool == "AdaptiveAvgPool2D":
        target = draw(st.integers(1, 2))
        layers.append(f"ug.nn.AdaptiveAvgPool2D({target})")
        size = target
    elif pool and size >= 2:
        layers.append(f"ug.nn.{pool}(2)")
        size //= 2
    return layers + ["ug.nn.Flatten()"], out * size * size


def _optimizer(draw) -> str:
    kind = draw(st.sampled_from(["SGD", "Momentum", "Adam"]), label="optimizer")
    lr = draw(st.sampled_from([0.1, 0.05, 0.5]))
    args = [f"lr={lr}"]
    if kind == "Momentum":
        args.append(f"momentum={draw(st.sampled_from([0.9, 0.5]))}")
        if draw(st.booleans(), label="nesterov"):
            args.append("nesterov=True")
    if draw(st.booleans(), label="weight decay"):
        args.append(f"weight_decay={draw(st.sampled_from([0.01, 0.1]))}")
    if kind == "Adam":
        args = [f"lr={lr / 10:g}"] + args[1:]  # Adam's steps are about lr each
        if draw(st.booleans(), label="fused"):
            args.append("fused=True")
    return f"ug.optim.{kind}({{params}}, {', '.join(args)})"


def _frozen(draw, layers: list) -> str:
    """"" or a parameter of the model to freeze: `model[k].bias` of a Linear or Conv2D."""
    with_bias = [k for k, layer in enumerate(layers) if layer.startswith(
        ("ug.nn.Linear", "ug.nn.Conv2D")) and "bias=False" not in layer]
    if not draw(st.booleans(), label="frozen"):
        return ""
    return f"model[{draw(st.sampled_from(with_bias))}].bias"


@st.composite
def trainings(draw, dtypes=("float32", "float64"), open_dims=True) -> Training:
    """A random valid `Training` (see the module docstring); with `open_dims`, a compiled
    step's input_spec may leave the batch dim open."""
    dtype = draw(st.sampled_from(list(dtypes)), label="dtype")
    batch = draw(st.integers(2, 4), label="batch")
    classes = draw(st.integers(2, 4), label="classes")
    custom = None
    if draw(st.booleans(), label="conv"):
        channels, size = draw(st.integers(1, 2)), draw(st.integers(3, 5))
        shape = (batch, channels, size, size)
        layers, width = _conv_layers(draw, channels, size)
        dense, custom = _dense_layers(draw, width, classes)
        layers += dense
    else:
        features = draw(st.integers(2, 4))
        shape = (batch, features)
        layers, custom = _dense_layers(draw, features, classes)
    inputs = [Input(Var("x", shape), draw(st.integers(0, 2**16), label="input seed"))]
    loss = draw(st.sampled_from(["cross_entropy", "mse_loss"]), label="loss")
    labels = ()
    if loss == "cross_entropy":
        labels = tuple(draw(st.lists(st.integers(0, classes - 1), min_size=batch,
                                     max_size=batch)))
    else:
        inputs.append(Input(Var("y", (batch, classes)), draw(st.integers(0, 2**16))))
    return Training(dtype, inputs, layers, custom, loss, labels, _optimizer(draw),
                    draw(st.integers(1, 3), label="steps"),
                    draw(st.sampled_from(STYLES), label="style"),
                    draw(st.sampled_from(["train", "eval"]), label="mode"),
                    draw(st.integers(0, 2**16), label="init seed"), _frozen(draw, layers),
                    open_dims and draw(st.booleans(), label="open batch"))
