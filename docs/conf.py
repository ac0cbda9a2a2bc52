"""Sphinx configuration of isaaclab_suspend's documentation: ``sphinx-build -W -b html docs <out>``
(tests/test_docs.py builds it with warnings as errors; every cross-reference must resolve: ``nitpicky``)."""

import inspect
import os
import sys

sys.path.insert(0, os.path.abspath(os.path.join(os.path.dirname(__file__), "..")))

import isaaclab_suspend  # noqa: E402  (light: reads the version, imports nothing heavy)

project = "isaaclab_suspend"
author = "isaaclab_suspend developers"
copyright = "isaaclab_suspend developers, BSD-3-Clause"
release = version = isaaclab_suspend.__version__

extensions = ["sphinx.ext.autodoc", "sphinx.ext.napoleon"]
autodoc_member_order = "bysource"
autodoc_typehints = "description"
autodoc_default_options = {"members": True, "show-inheritance": True, "inherited-members": False,
                           "undoc-members": False}
napoleon_google_docstring = True
napoleon_numpy_docstring = False

exclude_patterns = ["_build", "examples"]
html_static_path = ["_static"]
html_theme = "alabaster"

nitpicky = True
nitpick_ignore_regex = [
    # Third-party names: the machine that builds the docs has no network, so no intersphinx inventories.
    (r"py:.*", r"(torch|np|numpy|gym|gymnasium|warp|wp|newton|h5py|isaaclab|isaaclab_tasks|isaaclab_rl|rsl_rl|skrl"
               r"|isaaclab_newton|isaaclab_physx|lerobot|tensorboard|msgpack|zmq|websockets|openpi_client|PIL|matplotlib"
               r"|safetensors|prettytable|tqdm|hydra|omegaconf)(\..*)?"),
    # The standard library (no intersphinx inventory offline either).
    (r"py:.*", r"(collections|collections\.abc|typing|types|pathlib|os|io|concurrent\.futures|multiprocessing"
               r"|threading|socket|subprocess|argparse|logging|dataclasses|enum|json|queue|contextlib|asyncio"
               r"|selectors|mmap|ctypes|abc|datetime|re|weakref)\..*"),
    (r"py:class", r"(Path|Callable|Iterable|Iterator|Sequence|Mapping|MutableMapping|Generator|Any|Literal|Self"
                  r"|TypeVar|ModuleType|TextIO|BinaryIO|Event|Thread|Lock|Queue|Namespace|ArgumentParser"
                  r"|ArgumentTypeError|Tensor|ndarray|dtype|Generator)"),
    # Isaac Lab's and rsl_rl's classes as their own modules and our imports name them, without their package.
    (r"py:class", r"(ManagerBasedRLEnv|ManagerBasedRLEnvCfg|ManagerBasedEnv|RecorderManager|RecorderManagerCfg"
                  r"|RecorderManagerBaseCfg|RecorderTerm|RecorderTermCfg|DirectRLEnv|SceneEntityCfg|ObservationTermCfg"
                  r"|EventTermCfg|TerminationTermCfg|CameraCfg|InteractiveScene|InteractiveSceneCfg|ArticulationCfg"
                  r"|RigidObjectCfg|DatasetExportMode|EpisodeData|HDF5DatasetFileHandler|MLPModel|MISSING)"),
    (r"py:meth", r"(InteractiveScene|RecorderManager|ManagerBasedRLEnv)\..*"),
]



# Each object is documented once, on the page of the package that defines it: a package's ``__all__`` may re-export
# another package's names (``runs`` re-exports the chunk-model source cfgs of ``learning``, ``rl``, ...), which would
# otherwise be described twice. autodoc emits a module's own docstring event before it filters its members.
# A class shows the members its own source defines: ``@configclass`` copies the fields (and Isaac Lab's ``replace``,
# ``to_dict``, ...) of every base into the class, where autodoc would take them for its own.
_documenting = {"module": "", "class": None}


def _note_documented(app, what, name, obj, options, lines):
    if what == "module":
        _documenting["module"] = name
    elif what in ("class", "exception"):
        _documenting["class"] = obj


def _defined_in_source(cls, name):
    from sphinx.pycode import ModuleAnalyzer

    try:
        analyzer = ModuleAnalyzer.for_module(cls.__module__)
        analyzer.analyze()
    except Exception:
        return True
    return f"{cls.__qualname__}.{name}" in analyzer.tagorder


def _data_doc(package, name):
    """The doc comment of a constant that ``package`` exports, from the module of the package that defines it."""
    from sphinx.pycode import ModuleAnalyzer

    obj = _import_path(f"{package}.{name}")
    for module in sorted(m for m in sys.modules if m == package or m.startswith(package + ".")):
        if getattr(sys.modules[module], name, _NOTHING) is obj:
            try:
                analyzer = ModuleAnalyzer.for_module(module)
                analyzer.analyze()
            except Exception:
                continue
            if ("", name) in analyzer.attr_docs:
                return list(analyzer.attr_docs[("", name)])
    return None


def _skip_member(app, what, name, obj, skip, options):
    if what == "module":
        defined_in = getattr(obj, "__module__", None) or ""
        package = _documenting["module"]
        if defined_in.startswith("isaaclab_suspend.") and package.startswith("isaaclab_suspend."):
            if not (defined_in + ".").startswith(package + "."):
                return True
        exported = getattr(sys.modules.get(package), "__all__", ())
        if skip and name in exported and not (inspect.isclass(obj) or inspect.isroutine(obj) or inspect.ismodule(obj)):
            return False if _data_doc(package, name) else None  # a constant the package re-exports
    elif what in ("class", "exception") and isinstance(_documenting["class"], type):
        cls = _documenting["class"]
        if inspect.isroutine(obj) and (getattr(obj, "__module__", None) or "").split(".")[0] == "isaaclab":
            return True  # what @configclass adds: replace, to_dict, from_dict, copy, validate
        inherited = any(hasattr(base, name) or name in getattr(base, "__dataclass_fields__", {})
                        for base in cls.__mro__[1:])
        if inherited and not _defined_in_source(cls, name):
            return True
    return None


def _no_inline_attribute_type(app, what, name, obj, options, lines):
    """Our attribute docstrings are prose ("Goal: the step time ..."); napoleon would read the words before the first
    colon as the attribute's type. The types come from the annotations (``autodoc_typehints``)."""
    if what in ("attribute", "data", "property") and lines and lines[0].strip():
        lines[:0] = ["..", ""]  # napoleon's first line is then an empty comment, without a colon


_NOTHING = object()


def _import_path(path):
    """The object a dotted path names (the longest importable module, then attributes), or None."""
    import importlib

    parts = path.split(".")
    for split in range(len(parts), 0, -1):
        try:
            obj = importlib.import_module(".".join(parts[:split]))
        except Exception:
            continue
        for attr in parts[split:]:
            obj = getattr(obj, attr, _NOTHING)
            if obj is _NOTHING:
                return None
        return obj
    return None


def _described_object(node):
    """The object of the innermost description (``.. py:function::``, ...) around ``node``, or None."""
    from sphinx import addnodes

    parent = node.parent
    while parent is not None and not isinstance(parent, addnodes.desc):
        parent = parent.parent
    if parent is None:
        return None
    for signature in parent.findall(addnodes.desc_signature):
        if signature.get("module") and signature.get("fullname"):
            return _import_path(f"{signature['module']}.{signature['fullname']}")
        break
    return None


def _documented_name(domain, obj, tail):
    """The name under which the API pages document ``obj`` (the last part of its name is ``tail``), or None."""
    for name, entry in domain.objects.items():
        if name.startswith("isaaclab_suspend.") and name.rsplit(".", 1)[-1] == tail and not entry.aliased:
            if _import_path(name) is obj:
                return name
    return None


def _resolve_as_python_does(app, env, node, contnode):
    """A reference to one of our objects resolves as Python resolves the name in the module that wrote it: a short
    name (``SuspendCfg``) or a path relative to that module's package (``wires.WIRES``), a path through the module
    that defines it (``isaaclab_suspend.recording.staging_ring.StagingRing``) or through a package that re-exports
    it. It then points at the object the API pages document (once, on the page of the package that defines it); a
    submodule (``:mod:``) points at its package's page. A name that does not import stays unresolved and fails the
    build."""
    if node.get("refdomain") != "py":
        return None
    target = node["reftarget"].lstrip(".~")
    context = node.get("py:module") or ""
    if not target.startswith("isaaclab_suspend.") and not context.startswith("isaaclab_suspend"):
        return None
    modules = [context]  # where the reference was written: the documented module, the class's, the object's, the file's
    owner = _import_path(f"{context}.{node['py:class']}") if node.get("py:class") else None
    if owner is not None and getattr(owner, "__module__", None):
        modules.append(owner.__module__)
    described = _described_object(node)  # the object whose description holds the reference (its signature's types)
    if (inspect.isclass(described) or inspect.isroutine(described)) and getattr(described, "__module__", None):
        modules.append(described.__module__)
    source = (node.source or "").split(":docstring of ")[0]
    if source.endswith(".py") and "/isaaclab_suspend/" in source:
        path = "isaaclab_suspend/" + source.split("/isaaclab_suspend/", 1)[1][:-3]
        modules.append(path.replace("/", ".").removesuffix(".__init__"))
    candidates = [target] if target.startswith("isaaclab_suspend.") else []
    for module in modules:
        if module:
            candidates += [f"{module}.{target}", f"{module.rsplit('.', 1)[0]}.{target}"]
    domain = env.get_domain("py")
    for candidate in candidates:
        if node["reftype"] == "mod":
            module = candidate
            while module.count(".") and module not in domain.modules:
                module = module.rsplit(".", 1)[0]
            if module in domain.modules and _import_path(candidate) is not None:
                return domain.resolve_xref(env, node["refdoc"], app.builder, "mod", module, node, contnode)
            continue
        parts = candidate.split(".")  # the longest prefix that is an object the pages document, then its members
        for split in range(len(parts), 1, -1):
            obj = _import_path(".".join(parts[:split]))
            if obj is None or inspect.ismodule(obj):
                continue
            name = _documented_name(domain, obj, parts[split - 1])
            if name is not None:
                name = ".".join([name, *parts[split:]])
                if name in domain.objects:
                    reftype = node["reftype"]
                    if reftype == "class" and domain.objects[name].objtype == "data":
                        reftype = "data"  # a type alias (``TensorTree = Mapping[...]``) in a signature
                    return domain.resolve_xref(env, node["refdoc"], app.builder, reftype, name, node, contnode)
            break
    return None


def _configclass_signature(app, what, name, obj, options, signature, return_annotation):
    """A ``@configclass`` shows the fields its own source sets with their real defaults (configclass turns every
    default into a factory, which autodoc would show as ``<factory>``); its bases' fields are the bases'."""
    import dataclasses

    if what != "class" or not dataclasses.is_dataclass(obj) or not obj.__module__.startswith("isaaclab_suspend"):
        return None
    params = []
    for field in dataclasses.fields(obj):
        if not _defined_in_source(obj, field.name):
            continue
        if field.default is not dataclasses.MISSING:
            value = field.default
        elif field.default_factory is not dataclasses.MISSING:
            value = field.default_factory()
        else:
            params.append(field.name)
            continue
        text = repr(value)
        if len(text) > 60 or "\n" in text:
            text = f"{type(value).__name__}(...)"
        params.append(f"{field.name}={text}")
    return f"({', '.join(params)})", None


def _no_configclass_parameters(app, what, name, obj, options, signature, return_annotation):
    """No parameter list for a ``@configclass`` (its fields are documented as attributes, with their types)."""
    import dataclasses

    if what == "class" and dataclasses.is_dataclass(obj) and obj.__module__.startswith("isaaclab_suspend"):
        app.env.temp_data.get("annotations", {}).pop(name, None)


def _exported_data_documenter():
    from sphinx.ext.autodoc import DataDocumenter, ModuleDocumenter

    class ExportedDataDocumenter(DataDocumenter):
        """A constant in a package's ``__all__`` that one of its modules defines, with that module's doc comment
        (autodoc documents only the constants whose comment is in the documented module itself)."""

        objtype = "exporteddata"
        directivetype = "data"
        priority = DataDocumenter.priority + 1

        @classmethod
        def can_document_member(cls, member, membername, isattr, parent):
            return (isinstance(parent, ModuleDocumenter) and not isattr
                    and membername in (getattr(parent.object, "__all__", None) or ())
                    and not (inspect.isclass(member) or inspect.isroutine(member) or inspect.ismodule(member))
                    and _data_doc(parent.modname, membername) is not None)

        def get_doc(self):
            return [_data_doc(self.modname, self.objpath[-1])]

        def should_suppress_value_header(self):
            return not isinstance(self.object, (bool, int, float, str)) or super().should_suppress_value_header()

    return ExportedDataDocumenter


def setup(app):
    app.add_autodocumenter(_exported_data_documenter())
    app.connect("autodoc-process-docstring", _note_documented)
    app.connect("autodoc-process-docstring", _no_inline_attribute_type, priority=400)  # before napoleon
    app.connect("autodoc-skip-member", _skip_member)
    app.connect("autodoc-process-signature", _configclass_signature, priority=400)
    app.connect("autodoc-process-signature", _no_configclass_parameters, priority=600)  # after autodoc's typehints
    app.connect("missing-reference", _resolve_as_python_does)
