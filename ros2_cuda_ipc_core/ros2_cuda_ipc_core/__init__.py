"""Zero-copy sharing of GPU and host buffers between ROS 2 processes.

A publisher borrows a block from a :class:`BlockManager`, writes it, and publishes the small
``BufferCore`` descriptor that :meth:`PublishBlock.prepare_publish` returns.  A :class:`Reader`
turns the descriptor back into a leased, read-only view of the very same memory.  The typed layer
(:class:`TypedPublisher`, :class:`TypedReader`, :class:`StridedLayout`, ...) is what typed packages
(images, point clouds) build on.
"""

from . import startup  # noqa: F401  (first: in an executable, a stop while the rest imports is a clean exit 0)
from .arguments import bounded_number
from .cross_device import CROSS_DEVICE_MODES, CrossDevice
from .cuda_array import CudaArray
from .cuda_context import (
    CUDA_WAIT_ENVIRONMENT,
    CUDA_WAITS,
    check_cuda_wait,
    cuda_wait,
    cuda_wait_from_environment,
    set_cuda_wait,
)
from .cuda_driver import device_count as cuda_device_count
from .diagnostics import DIAGNOSTICS_TOPIC, DiagnosticsReporter, PoolDiagnostics, ReaderDiagnostics
from .diagnostics_format import REPORT_PERIOD_S, STATUS_PREFIX, ReportedCount, ReportedStatus, read_status
from .dlpack_dtype import DLPackDType
from .download import BackgroundDownload
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
from .executors import EXECUTOR_ENVIRONMENT, EXECUTORS, executor_factory, executor_from_environment, new_executor
from .jpeg import ChannelOrder, JpegUnavailableError, encode_jpeg, jpeg_backend, warm_up_jpeg
from .message_bytes import message_bytes
from .node_cli import STARTUP_ERRORS, node_help, plain_text, refuse_unusable_memory, run_node, tool_parser
from .parameters import NodeParameter, ParameterError, ParameterValue, declare, parameter_table
from .pool import DEFAULT_REUSE_DELAY, BlockManager, MemoryKind, check_reuse_delay
from .publish_block import PublishBlock
from .read_handle import ReadHandle
from .reader import Reader
from .shutdown import (
    TEARDOWN_BOUND,
    run_nodes,
    run_tool,
    spin_until_stopped,
    stop_reason,
    stop_signals_noted,
    teardown_bounded,
)
from .streams import StreamLike
from .topic_check import DEFAULT_CHECK_DELAY, TopicCheck, check_topic, message_type_name
from .transfer import copy_rows, copy_strided
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
    check_frame_bytes,
    strided_source,
    twin_topic,
)
from .views import beyond_array_limits

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
    "check_cuda_wait",
    "check_frame_bytes",
    "check_reuse_delay",
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
    "parameter_table",
    "plain_text",
    "read_status",
    "refuse_unusable_memory",
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
    "twin_topic",
    "warm_up_jpeg",
]
