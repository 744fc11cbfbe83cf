"""A component container for Python nodes: several nodes in one process, loaded by ``package::Class`` name.

    container --load ros2_cuda_ipc_examples::SyntheticCamera --name camera --param width:=1920 \\
              --load ros2_cuda_ipc_examples::Preview --name preview --remap image:=/camera/image
    container --file pipeline.yaml [--executor multi|events]
    ros2 run ros2_cuda_ipc_tools container        # then: ros2 component load /ComponentManager ...

rclpy has no container of its own. This one loads the classes registered in the
``ros2_cuda_ipc.components`` entry-point group (see :mod:`~ros2_cuda_ipc_tools.components.registry`)
onto one executor. Where ``composition_interfaces`` is importable it also serves
``~/_container/load_node``, ``~/_container/unload_node`` and ``~/_container/list_nodes`` with
rclcpp's request and response fields, so ``ros2 component`` and launch's composable-node
actions work with it. Nodes in one container read each other's frames through the
same-process path without being told. With ``--restart-components`` a component whose callback
raises is logged, unloaded and loaded again from its spec after a back-off (0.5 s doubling to 8 s
while it keeps failing within 10 s), and the others carry on.
"""

from __future__ import annotations

import argparse
import itertools
import sys
import time
import traceback
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from rclpy.executors import Executor
from rclpy.node import Node
from rclpy.parameter import Parameter

from ros2_cuda_ipc_core import EXECUTORS, executor_factory, new_executor, run_nodes, tool_parser, warn_unknown_parameters

from .parent_watch import follow_runner
from .registry import COMPONENT_GROUP, UnknownComponentError, available_components, component_class
from .restarting import RestartingExecutor
from .run_component import CONFIGURATION_ERRORS

__all__ = ["ComponentContainer", "ComponentLoadError", "ComponentSpec", "LoadedComponent", "main", "read_pipeline_file"]

_LOG_LEVELS = {10: "debug", 20: "info", 30: "warn", 40: "error", 50: "fatal"}  # rcl_interfaces/Log levels


class ComponentLoadError(RuntimeError):
    """A component was found but could not be constructed; the message says which and why."""


@dataclass(frozen=True)
class ComponentSpec:
    """What to load: the ``package::Class`` name, and the node's name, namespace, parameters and remappings."""

    plugin: str
    name: str | None = None
    namespace: str | None = None
    parameters: Mapping[str, Any] = field(default_factory=dict)
    remappings: Mapping[str, str] = field(default_factory=dict)
    log_level: int = 0

    def node_arguments(self) -> dict[str, Any]:
        """The keyword arguments of ``rclpy.node.Node`` that give the node this spec's identity."""
        rules = [f"{source}:={target}" for source, target in self.remappings.items()]
        if self.name:
            rules.append(f"__node:={self.name}")
        if self.namespace:
            rules.append(f"__ns:={self.namespace if self.namespace.startswith('/') else '/' + self.namespace}")
        cli_args = ["--ros-args", *itertools.chain.from_iterable(("-r", rule) for rule in rules)]
        if self.log_level in _LOG_LEVELS and self.name:  # a node's logger is its namespace and name, dotted
            logger = ".".join(part for part in [*(self.namespace or "").split("/"), self.name] if part)
            cli_args += ["--log-level", f"{logger}:={_LOG_LEVELS[self.log_level]}"]
        overrides = [Parameter(key, value=value) for key, value in self.parameters.items()]
        # The container's own command line (its name, its remappings) must not rename every node in it.
        return {"cli_args": cli_args, "parameter_overrides": overrides, "use_global_arguments": False}


@dataclass(frozen=True)
class LoadedComponent:
    unique_id: int
    plugin: str
    node: Node
    spec: ComponentSpec | None = None  # what it was loaded from (a restart loads it again)
    loaded_at: float = field(default_factory=time.monotonic)

    @property
    def full_name(self) -> str:
        return self.node.get_fully_qualified_name()


class ComponentContainer(Node):
    """A node that loads component nodes into its process and spins them on ``executor``.

    ``destroy_node()`` destroys every component first. Unique ids count from 1, as rclcpp's do.
    On a :class:`~.restarting.RestartingExecutor` a component whose callback raises is loaded again
    (a new unique id) after a back-off; :attr:`restarts` counts them by node name.
    """

    def __init__(self, executor: Executor, **kwargs: Any) -> None:
        super().__init__("ComponentManager", **kwargs)
        self._executor = executor
        self._components: dict[int, LoadedComponent] = {}
        self._ids = itertools.count(1)
        self.restarts: dict[str, int] = {}
        self._delays: dict[str, float] = {}
        if isinstance(executor, RestartingExecutor):
            executor.on_error = self._restart
        self.container_services = _serve_composition_interfaces(self)

    @property
    def components(self) -> list[LoadedComponent]:
        """The loaded components, in load order."""
        return list(self._components.values())

    def load(self, spec: ComponentSpec | str, **spec_fields: Any) -> LoadedComponent:
        """Construct ``spec``'s node (or ``ComponentSpec(spec, **spec_fields)``) and add it to the executor.

        Raises ``UnknownComponentError`` (listing what is available) or ``ComponentLoadError``.
        """
        if isinstance(spec, str):
            spec = ComponentSpec(spec, **spec_fields)
        node_class = component_class(spec.plugin)
        try:
            node = node_class(context=self.context, **spec.node_arguments())
        except Exception as exc:
            raise ComponentLoadError(f"{spec.plugin} could not be loaded: {exc}") from exc
        warn_unknown_parameters(node)  # a misspelled --param does nothing: say so, with the closest name
        loaded = LoadedComponent(next(self._ids), spec.plugin, node, spec)
        self._components[loaded.unique_id] = loaded
        self._executor.add_node(node)
        self.get_logger().info(f"loaded {spec.plugin} as {loaded.full_name} (id {loaded.unique_id})")
        return loaded

    def unload(self, unique_id: int) -> None:
        """Remove and destroy the component ``unique_id``; KeyError naming the loaded ids if there is none."""
        try:
            loaded = self._components.pop(unique_id)
        except KeyError:
            raise KeyError(f"no component with unique id {unique_id}; loaded: {sorted(self._components) or 'none'}") \
                from None
        name = loaded.full_name
        self._executor.remove_node(loaded.node)
        loaded.node.destroy_node()
        if self.context.ok():  # after Ctrl-C the context is gone: a log line would fail to reach /rosout, loudly
            self.get_logger().info(f"unloaded {name} (id {unique_id})")

    def destroy_node(self) -> None:
        for unique_id in reversed(list(self._components)):
            self.unload(unique_id)
        super().destroy_node()

    def _restart(self, node: Node, error: Exception) -> bool:
        """A callback of ``node`` raised: if it is a component, unload it and load it again after a back-off."""
        loaded = next((c for c in self._components.values() if c.node is node), None)
        if loaded is None or loaded.spec is None:
            return False
        name, spec = loaded.full_name, loaded.spec
        self.get_logger().error(f"{name} raised in a callback; restarting it:\n"
                                + "".join(traceback.format_exception(error)).rstrip())
        self.unload(loaded.unique_id)
        self._schedule(name, spec, settled=time.monotonic() - loaded.loaded_at > 10.0)
        return True

    def _schedule(self, name: str, spec: ComponentSpec, settled: bool) -> None:
        """Load ``spec`` again after the back-off: 0.5 s, doubling to 8 s while it keeps failing."""
        delay = self._delays[name] = 0.5 if settled else min(8.0, self._delays.get(name, 0.25) * 2)
        timers: list[Any] = []

        def fire() -> None:
            self.destroy_timer(timers[0])
            self.restarts[name] = self.restarts.get(name, 0) + 1
            try:
                self.load(spec)
            except ComponentLoadError as exc:  # it cannot start now: try again later
                self.get_logger().error(f"restarting {name} failed: {exc}")
                self._schedule(name, spec, settled=False)

        timers.append(self.create_timer(delay, fire))


def _serve_composition_interfaces(container: ComponentContainer) -> list[Any]:
    """rclcpp's three container services, where ``composition_interfaces`` exists (ROS installs)."""
    try:
        from composition_interfaces.srv import ListNodes, LoadNode, UnloadNode
    except ImportError:
        return []

    def load_node(request: Any, response: Any) -> Any:
        spec = ComponentSpec(
            request.plugin_name, name=request.node_name or None, namespace=request.node_namespace or None,
            parameters={p.name: Parameter.from_parameter_msg(p).value for p in request.parameters},
            remappings=dict(rule.split(":=", 1) for rule in request.remap_rules if ":=" in rule),
            log_level=request.log_level)
        try:
            loaded = container.load(spec)
        except (UnknownComponentError, ComponentLoadError) as exc:
            response.success, response.error_message = False, str(exc)
            return response
        response.success, response.full_node_name, response.unique_id = True, loaded.full_name, loaded.unique_id
        return response

    def unload_node(request: Any, response: Any) -> Any:
        try:
            container.unload(request.unique_id)
            response.success = True
        except KeyError as exc:
            response.success, response.error_message = False, str(exc.args[0])
        return response

    def list_nodes(request: Any, response: Any) -> Any:
        response.full_node_names = [c.full_name for c in container.components]
        response.unique_ids = [c.unique_id for c in container.components]
        return response

    return [container.create_service(LoadNode, "~/_container/load_node", load_node),
            container.create_service(UnloadNode, "~/_container/unload_node", unload_node),
            container.create_service(ListNodes, "~/_container/list_nodes", list_nodes)]


def read_pipeline_file(path: str | Path) -> tuple[list[ComponentSpec], str | None]:
    """The components (and the executor, if named) of a YAML pipeline file::

        executor: single            # or multi, events
        components:
          - plugin: ros2_cuda_ipc_examples::SyntheticCamera
            name: camera
            namespace: /fanout
            parameters: {width: 1920, height: 1080}
            remappings: {image: camera/image}
    """
    try:
        import yaml
    except ImportError:
        raise SystemExit("reading a pipeline file needs PyYAML: pip install pyyaml (python3-yaml)") from None
    try:
        document = yaml.safe_load(Path(path).read_text())
    except (OSError, yaml.YAMLError) as exc:
        raise ValueError(f"{path}: {exc}") from None
    if not isinstance(document, dict) or not isinstance(document.get("components"), list):
        raise ValueError(f"{path}: expected a mapping with a 'components' list")
    specs = []
    for index, entry in enumerate(document["components"]):
        unknown = set(entry) - {"plugin", "name", "namespace", "parameters", "remappings"} if isinstance(entry, dict) \
            else {"(not a mapping)"}
        if unknown or "plugin" not in entry:
            raise ValueError(f"{path}: component {index} needs 'plugin' and may have name, namespace, parameters, "
                             f"remappings; got {sorted(unknown) or 'no plugin'}")
        specs.append(ComponentSpec(entry["plugin"], entry.get("name"), entry.get("namespace"),
                                   dict(entry.get("parameters") or {}), dict(entry.get("remappings") or {})))
    executor = document.get("executor")
    if executor not in (None, *EXECUTORS):
        raise ValueError(f"{path}: executor must be one of {', '.join(EXECUTORS)}, not {executor!r}")
    return specs, executor


def parse_value(text: str) -> Any:
    """A ``--param name:=value`` value as ``ros2 run -p`` reads it: bool, int, float, else the string."""
    lowered = text.lower()
    if lowered in ("true", "false"):
        return lowered == "true"
    for kind in (int, float):
        try:
            return kind(text)
        except ValueError:
            pass
    return text


def _pair(text: str, what: str) -> tuple[str, str]:
    name, sep, value = text.partition(":=")
    if not sep or not name:
        raise argparse.ArgumentTypeError(f"{what} {text!r} must look like name:=value")
    return name, value


class _ComponentAction(argparse.Action):
    """--load starts a component; --name, --namespace, --param and --remap apply to the last one loaded."""

    def __call__(self, parser: argparse.ArgumentParser, namespace: argparse.Namespace, values: Any,
                 option_string: str | None = None) -> None:
        loads: list[dict[str, Any]] = namespace.components
        if self.dest == "load":
            loads.append({"plugin": values, "parameters": {}, "remappings": {}})
            return
        if not loads:
            parser.error(f"{option_string} must follow a --load")
        current = loads[-1]
        if self.dest in ("name", "namespace"):
            current[self.dest] = values
        else:
            try:  # raised from an action, ArgumentTypeError would be a traceback: make it argparse's rc 2 line
                self._add_pair(current, values)
            except argparse.ArgumentTypeError as exc:
                parser.error(str(exc))

    def _add_pair(self, current: dict[str, Any], values: str) -> None:
        if self.dest == "param":
            key, value = _pair(values, "--param")
            current["parameters"][key] = parse_value(value)
        else:
            source, target = _pair(values, "--remap")
            current["remappings"][source] = target


def build_parser() -> argparse.ArgumentParser:
    parser = tool_parser(__name__, __doc__, prog="container")
    parser.set_defaults(components=[])
    parser.add_argument("--load", metavar="PACKAGE::CLASS", action=_ComponentAction, help="load this component")
    parser.add_argument("--name", action=_ComponentAction, help="node name of the last --load")
    parser.add_argument("--namespace", action=_ComponentAction, help="namespace of the last --load")
    parser.add_argument("--param", metavar="NAME:=VALUE", action=_ComponentAction, help="parameter of the last --load")
    parser.add_argument("--remap", metavar="FROM:=TO", action=_ComponentAction, help="remapping of the last --load")
    parser.add_argument("--file", type=Path, help="YAML pipeline file of components to load (see read_pipeline_file)")
    parser.add_argument("--executor", choices=EXECUTORS, default=None,
                        help="rclpy's single- or multi-threaded executor, or its C++ events executor (default: the "
                             "file's, else single)")
    parser.add_argument("--restart-components", action="store_true",
                        help="a component whose callback raises is unloaded and loaded again after a back-off "
                             "(single executor only)")
    parser.add_argument("--list", action="store_true", help="print the components that can be loaded, then exit")
    return parser


def main(argv: Sequence[str] | None = None) -> None:
    follow_runner()
    full = list(sys.argv[1:] if argv is None else argv)
    split = full.index("--ros-args") if "--ros-args" in full else len(full)
    parser = build_parser()
    args = parser.parse_args(full[:split])
    ros_args = [sys.argv[0], *full[split:]]  # the container node's own; its name:=value pairs are not remappings
    if args.list:
        print("\n".join(available_components()) or f"no components registered in {COMPONENT_GROUP}")
        raise SystemExit(0)
    specs = [ComponentSpec(**entry) for entry in args.components]
    executor_kind = args.executor
    if args.file is not None:
        try:
            file_specs, file_executor = read_pipeline_file(args.file)
        except ValueError as exc:
            parser.error(str(exc))
        specs = file_specs + specs
        executor_kind = executor_kind or file_executor
    available = set(available_components())
    for spec in specs:
        if spec.plugin not in available:
            parser.error(str(UnknownComponentError(f"no component named {spec.plugin!r}; available: "
                                                   f"{', '.join(sorted(available))}")))
    if args.restart_components and executor_kind not in (None, "single"):
        parser.error("--restart-components needs the single executor")
    try:
        factory = executor_factory(executor_kind or "single")
    except ValueError as exc:
        parser.error(str(exc))
    executors: list[Executor] = []

    def make_executor() -> Executor:  # after rclpy.init: an executor needs an initialized context
        executors.append(new_executor(RestartingExecutor) if args.restart_components else factory())
        return executors[0]

    def make_nodes() -> list[Node]:
        container = ComponentContainer(executors[0])
        for spec in specs:
            container.load(spec)
        return [container]

    refusals: tuple[type[BaseException], ...] = (ComponentLoadError, *CONFIGURATION_ERRORS)
    try:
        code = run_nodes(make_nodes, args=ros_args, executor=make_executor)
    except refusals as exc:
        print(f"container: {exc}", file=sys.stderr)
        code = 2
    raise SystemExit(code)


if __name__ == "__main__":
    main()
