"""`ModuleList` and `ModuleDict`: containers whose Modules register as children.

(A plain list, tuple or dict attribute of Modules or Parameters registers too; these give
the container its own methods: append, insert, keys, ...)
"""

from __future__ import annotations

from unigraph.nn.module import Module

__all__ = ["ModuleDict", "ModuleList"]


class ModuleList(Module):
    """A list of Modules, registered as children named "0", "1", ... (so their weights are
    `layers.0.weight`, ... in `named_parameters` and `state_dict`). Iterate over it in
    your `forward`; it has none itself.

    >>> self.layers = ug.nn.ModuleList([ug.nn.Linear(8, 8) for _ in range(3)])
    >>> for layer in self.layers:
    ...     x = layer(x)
    """

    def __init__(self, modules=()):
        super().__init__()
        self.extend(modules)

    @staticmethod
    def _checked(module, index) -> Module:
        if not isinstance(module, Module):
            raise TypeError(f"ModuleList: item {index} is a {type(module).__name__}, not a "
                            "ug.nn.Module (hold Parameters in a plain list attribute)")
        return module

    def _reset(self, modules: list) -> None:
        for name in list(self._modules):
            delattr(self, name)
        for index, module in enumerate(modules):
            setattr(self, str(index), self._checked(module, index))

    def append(self, module: Module) -> ModuleList:
        setattr(self, str(len(self)), self._checked(module, len(self)))
        return self

    def extend(self, modules) -> ModuleList:
        for module in modules:
            self.append(module)
        return self

    def insert(self, index: int, module: Module) -> None:
        modules = list(self)
        modules.insert(index, module)
        self._reset(modules)

    def __len__(self):
        return len(self._modules)

    def __iter__(self):
        return iter(list(self._modules.values()))

    def __getitem__(self, index):
        modules = list(self._modules.values())
        return modules[index]  # a slice gives a plain list (the modules keep their names)

    def __setitem__(self, index: int, module: Module) -> None:
        modules = list(self)
        modules[index] = module
        self._reset(modules)

    def __delitem__(self, index) -> None:
        modules = list(self)
        del modules[index]
        self._reset(modules)

    def forward(self, *args, **kwargs):
        raise NotImplementedError("ModuleList has no forward(): iterate over it in your "
                                  "module's forward()")


class ModuleDict(Module):
    """A dict of Modules, registered as children named by their (string) keys, in
    insertion order: `blocks.encoder.weight`. Index it in your `forward`.

    >>> self.heads = ug.nn.ModuleDict({"digit": ug.nn.Linear(64, 10),
    ...                                "parity": ug.nn.Linear(64, 2)})
    >>> logits = self.heads["digit"](features)
    """

    def __init__(self, modules=None):
        super().__init__()
        self.update(modules or {})

    def __setitem__(self, key: str, module: Module) -> None:
        if not isinstance(key, str) or not key or "." in key:
            raise KeyError(f"ModuleDict: keys must be non-empty strings without '.', got "
                           f"{key!r}")
        if not isinstance(module, Module):
            raise TypeError(f"ModuleDict: {key!r} is a {type(module).__name__}, not a "
                            "ug.nn.Module")
        # Kept out of the instance's attributes, so that a key like "train" cannot hide
        # a method.
        self._modules[key] = module
        module._set_path(self._child_path(key))

    def __getitem__(self, key: str) -> Module:
        return self._modules[key]

    def __delitem__(self, key: str) -> None:
        del self._modules[key]

    def __getattr__(self, name):
        modules = self.__dict__.get("_modules", {})
        if name in modules:
            return modules[name]
        raise AttributeError(f"{type(self).__name__} has no attribute or key {name!r}")

    def __contains__(self, key) -> bool:
        return key in self._modules

    def __len__(self):
        return len(self._modules)

    def __iter__(self):
        return iter(list(self._modules))

    def keys(self):
        return list(self._modules.keys())

    def values(self):
        return list(self._modules.values())

    def items(self):
        return list(self._modules.items())

    def update(self, modules) -> None:
        pairs = modules.items() if isinstance(modules, dict) else modules
        for key, module in pairs:
            self[key] = module

    def forward(self, *args, **kwargs):
        raise NotImplementedError("ModuleDict has no forward(): index it in your module's "
                                  "forward()")
