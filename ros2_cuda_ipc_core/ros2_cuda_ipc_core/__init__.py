"""Zero-copy sharing of GPU and host buffers between ROS 2 processes.

A publisher borrows a block from a :class:`BlockManager`, writes it, and publishes the small
``BufferCore`` descriptor that :meth:`PublishBlock.prepare_publish` returns.  A :class:`Reader`
turns the descriptor back into a leased, read-only view of the very same memory.  The typed layer
(:class:`TypedPublisher`, :class:`TypedReader`, :class:`StridedLayout`, ...) is what typed packages
(images, point clouds) build on.
"""

# isort: split
from .node import startup  # noqa: F401  (first: in an executable, a stop while the rest imports is a clean exit 0)

# isort: split

from .errors import (
    CudaDriverError,
    CudaUnavailableError,
    DeviceMismatchError,
    IdentityUnverifiableError,
    InvalidDescriptorError,
    PoolIdentityError,
    PoolUnavailableError,
    Ros2CudaIpcError,
    StaleDescriptorError,
)
from .memory.cross_device import CROSS_DEVICE_MODES, CrossDevice
from .memory.cuda_array import CudaArray
from .memory.cuda_context import (
    CUDA_WAIT_ENVIRONMENT,
    CUDA_WAITS,
    check_cuda_wait,
    cuda_wait,
    cuda_wait_from_environment,
    set_cuda_wait,
)
from .memory.cuda_driver import device_count as cuda_device_count
from .memory.dlpack_dtype import DLPackDType
from .memory.streams import StreamLike
from .memory.transfer import copy_rows, copy_strided
from .memory.views import beyond_array_limits
from .node.arguments import RosArgumentsError, bounded_number, check_ros_arguments, topic_name
from .node.diagnostics import DIAGNOSTICS_TOPIC, DiagnosticsReporter, PoolDiagnostics, ReaderDiagnostics
from .node.diagnostics_format import (
    REPORT_PERIOD_S,
    STATUS_PREFIX,
    ReportedCount,
    ReportedStatus,
    read_status,
    reported_number,
)
from .node.executors import EXECUTOR_ENVIRONMENT, EXECUTORS, executor_factory, executor_from_environment, new_executor
from .node.node_cli import (
    STARTUP_ERRORS,
    node_help,
    plain_text,
    refuse_unusable_memory,
    run_node,
    tool_parser,
    version_of,
)
from .node.parameters import (
    NodeParameter,
    ParameterError,
    ParameterValue,
    declare,
    not_negative,
    parameter_table,
    positive,
    warn_unknown_parameters,
)
from .node.shutdown import (
    TEARDOWN_BOUND,
    run_nodes,
    run_tool,
    spin_until_stopped,
    stop_reason,
    stop_signals_noted,
    teardown_bounded,
)
from .node.topic_check import DEFAULT_CHECK_DELAY, TopicCheck, check_topic, message_type_name
from .pool.block_manager import DEFAULT_REUSE_DELAY, BlockManager, MemoryKind, check_reuse_delay
from .pool.publish_block import PublishBlock
from .pool.read_handle import ReadHandle
from .pool.reader import Reader
from .typed import (
    DEFAULT_MAX_FRAME_BYTES,
    ArrayProtocols,
    ArrayView,
    BlockLayout,
    BlockPublisher,
    CpuTwins,
    DeliveryMode,
    DownloadBridge,
    FallbackMode,
    Route,
    StridedLayout,
    StridedSource,
    TwinSpec,
    TwinUpload,
    TypedFrame,
    TypedMessage,
    TypedPublisher,
    TypedReader,
    TypedSubscription,
    TypedView,
    UploadBridge,
    check_count,
    check_frame_bytes,
    check_index,
    check_integers,
    check_optional_count,
    strided_source,
    twin_topic,
)
from .typed.download import BackgroundDownload
from .typed.jpeg import ChannelOrder, JpegUnavailableError, encode_jpeg, jpeg_backend, warm_up_jpeg
from .typed.message_bytes import message_bytes

__all__ = [
    "CROSS_DEVICE_MODES",
    "CUDA_WAITS",
    "CUDA_WAIT_ENVIRONMENT",
    "DEFAULT_CHECK_DELAY",
    "DEFAULT_MAX_FRAME_BYTES",
    "DEFAULT_REUSE_DELAY",
    "DIAGNOSTICS_TOPIC",
    "EXECUTORS",
    "EXECUTOR_ENVIRONMENT",
    "REPORT_PERIOD_S",
    "STARTUP_ERRORS",
    "STATUS_PREFIX",
    "TEARDOWN_BOUND",
    "ArrayProtocols",
    "ArrayView",
    "BackgroundDownload",
    "BlockLayout",
    "BlockManager",
    "BlockPublisher",
    "ChannelOrder",
    "CpuTwins",
    "CrossDevice",
    "CudaArray",
    "CudaDriverError",
    "CudaUnavailableError",
    "DLPackDType",
    "DeliveryMode",
    "DeviceMismatchError",
    "DiagnosticsReporter",
    "DownloadBridge",
    "FallbackMode",
    "IdentityUnverifiableError",
    "InvalidDescriptorError",
    "JpegUnavailableError",
    "MemoryKind",
    "NodeParameter",
    "ParameterError",
    "ParameterValue",
    "PoolDiagnostics",
    "PoolIdentityError",
    "PoolUnavailableError",
    "PublishBlock",
    "ReadHandle",
    "Reader",
    "ReaderDiagnostics",
    "ReportedCount",
    "ReportedStatus",
    "Ros2CudaIpcError",
    "RosArgumentsError",
    "Route",
    "StaleDescriptorError",
    "StreamLike",
    "StridedLayout",
    "StridedSource",
    "TopicCheck",
    "TwinSpec",
    "TwinUpload",
    "TypedFrame",
    "TypedMessage",
    "TypedPublisher",
    "TypedReader",
    "TypedSubscription",
    "TypedView",
    "UploadBridge",
    "beyond_array_limits",
    "bounded_number",
    "check_count",
    "check_cuda_wait",
    "check_frame_bytes",
    "check_index",
    "check_integers",
    "check_optional_count",
    "check_reuse_delay",
    "check_ros_arguments",
    "check_topic",
    "copy_rows",
    "copy_strided",
    "cuda_device_count",
    "cuda_wait",
    "cuda_wait_from_environment",
    "declare",
    "encode_jpeg",
    "executor_factory",
    "executor_from_environment",
    "jpeg_backend",
    "message_bytes",
    "message_type_name",
    "new_executor",
    "node_help",
    "not_negative",
    "parameter_table",
    "plain_text",
    "positive",
    "read_status",
    "refuse_unusable_memory",
    "reported_number",
    "run_node",
    "run_nodes",
    "run_tool",
    "set_cuda_wait",
    "spin_until_stopped",
    "stop_reason",
    "stop_signals_noted",
    "strided_source",
    "teardown_bounded",
    "tool_parser",
    "topic_name",
    "twin_topic",
    "version_of",
    "warm_up_jpeg",
    "warn_unknown_parameters",
]
