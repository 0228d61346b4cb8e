"""NVRTC compiles (through cuasync's memory and disk caches), kernel packages, and checked launches."""
import ctypes
import math
import operator
import struct
import sys

from . import _capi, _completion, errors
from ._runtime import Runtime, Stream, as_stream


def _strings(items):
    items = [i.encode() if isinstance(i, str) else bytes(i) for i in items]
    return (ctypes.c_char_p * max(1, len(items)))(*items), len(items)


def compile(source, name="kernel.cu", options=(), headers=None, name_expressions=(), runtime=None):
    """Compiles CUDA C++ `source` with NVRTC for `runtime`'s device (default: device 0) and loads it. `headers` maps
    include names to contents; `name_expressions` ("scale<float>") make template instances reachable by
    `Module.kernel`. A compile error raises CompileError with NVRTC's log. Blocks while NVRTC runs (a cache hit
    takes microseconds): compile before a CUDA graph capture, or in an executor from a coroutine."""
    runtime = runtime or Runtime.for_device(0)
    opts, n_opts = _strings(options)
    exprs, n_exprs = _strings(name_expressions)
    headers = dict(headers or {})
    hdrs = (_capi.Header * max(1, len(headers)))(*[_capi.Header(k.encode(), v.encode()) for k, v in headers.items()])
    a = _capi.call("compile", _capi.CompileArgs(
        runtime=runtime.handle, name=name.encode(), source=source.encode(), options=opts, num_options=n_opts,
        headers=hdrs, num_headers=len(headers), name_expressions=exprs, num_name_expressions=n_exprs))
    return Module(a.module, runtime, name)


def load_package(directory, runtime=None):
    """Loads a kernel package (a directory with a `cuasync.manifest`), compiled for `runtime`'s device."""
    runtime = runtime or Runtime.for_device(0)
    a = _capi.call("package_load", _capi.PackageLoadArgs(runtime=runtime.handle, directory=str(directory).encode()))
    return Module(a.module, runtime, str(directory))


class Module:
    """A compiled program loaded into a runtime's context. Its kernels are valid while it lives."""

    def __init__(self, handle, runtime, name):
        self.handle = handle
        self.runtime = runtime
        self.name = name
        self._kernels = {}

    def kernel(self, name):
        """The kernel `name` (an extern "C" name, or a name expression given to compile)."""
        k = self._kernels.get(name)
        if k is None:
            sizes = (ctypes.c_size_t * 64)()
            a = _capi.call("kernel_get", _capi.KernelGetArgs(module=self.handle, name=name.encode(),
                                                             param_sizes=sizes, param_sizes_capacity=64))
            if a.num_params > 64:
                sizes = (ctypes.c_size_t * a.num_params)()
                a = _capi.call("kernel_get", _capi.KernelGetArgs(module=self.handle, name=name.encode(),
                                                                 param_sizes=sizes,
                                                                 param_sizes_capacity=a.num_params))
            k = self._kernels[name] = Kernel(self, a.kernel, name, tuple(sizes[i] for i in range(a.num_params)))
        return k

    def __getattr__(self, name):
        if name.startswith("_"):
            raise AttributeError(name)
        return self.kernel(name)

    def __del__(self):
        h, self.handle = getattr(self, "handle", None), None
        if h:
            _capi.release("module_destroy", _capi.ModuleDestroyArgs(module=h))


_INT = {1: "b", 2: "h", 4: "i", 8: "q"}
_UINT = {1: "B", 2: "H", 4: "I", 8: "Q"}
_FLOAT = {2: "e", 4: "f", 8: "d"}


def _pointer_of(value):
    """A device address for a Buffer, a PyTorch tensor or anything with the CUDA array interface; else None."""
    ptr = getattr(value, "ptr", None)
    if isinstance(ptr, int) and hasattr(value, "nbytes") and hasattr(value, "kind"):  # a cuasync Buffer
        if not (value._parent if value._parent is not None else value).handle:  # inline: on every launch
            value._check_alive()
        return ptr
    data_ptr = getattr(value, "data_ptr", None)
    if data_ptr is not None and callable(data_ptr):
        return data_ptr()
    cai = getattr(value, "__cuda_array_interface__", None)
    if cai is not None:
        return cai["data"][0]
    return None


def pack_argument(kernel, i, size, value):
    """The bytes of argument `i` for a parameter of `size` bytes: pointers from buffers, tensors and arrays; ints
    and floats at the parameter's size (range-checked); ctypes values, numpy scalars and bytes as they are."""
    def bad(why):
        return errors.InvalidArgumentError(f"kernel '{kernel}' parameter {i} ({size} bytes): {why}")
    if isinstance(value, bool):
        value = int(value)
    if isinstance(value, int):
        if size not in _INT:
            raise bad(f"an int cannot fill {size} bytes")
        fmt = _INT[size] if value < 0 else _UINT[size]
        try:
            return struct.pack("<" + fmt, value)
        except struct.error:
            raise bad(f"{value} does not fit in {size} bytes") from None
    if isinstance(value, float):
        if size not in _FLOAT:
            raise bad("a float needs a 2, 4 or 8 byte parameter")
        try:
            return struct.pack("<" + _FLOAT[size], value)
        except OverflowError:  # e.g. 1e300 for a float32
            raise bad(f"{value} does not fit in a {size}-byte float") from None
    if isinstance(value, (bytes, bytearray)):
        data = bytes(value)
    elif isinstance(value, ctypes._SimpleCData) or isinstance(value, ctypes.Structure):
        data = bytes(memoryview(value).cast("B"))
    elif hasattr(value, "tobytes") and getattr(value, "shape", None) == ():  # a numpy scalar / 0-d array
        data = value.tobytes()
    else:
        ptr = _pointer_of(value)
        if ptr is None:
            raise bad(f"cannot pass a {type(value).__name__}")
        if size != 8:
            raise bad("a pointer needs an 8 byte parameter")
        return struct.pack("<Q", ptr)
    if len(data) != size:
        raise bad(f"the value has {len(data)} bytes")
    return data


def _dims(d):
    if isinstance(d, int) and not isinstance(d, bool):
        d = (d,)
    try:
        d = tuple(d)
    except TypeError:
        raise TypeError(f"a grid or block is an int or up to 3 ints, not {type(d).__name__} ({d!r})") from None
    if len(d) > 3:
        raise errors.InvalidArgumentError(f"a grid or block has at most 3 dimensions, not {len(d)}")
    for x in d:
        errors.check_int(x, "a grid or block dimension", 1, 1 << 31)
    return d + (1,) * (3 - len(d))


# cuasync_launch_args (ABI 1.1) as struct fields: struct_size, stream, kernel, grid[3], block[3], shared_memory_bytes,
# args, num_args, completion {queue, token, callback, user_data}, flags.
_LAUNCH_HEAD = "<QQQ3I3II4xQQQQQQI4x"
_LAUNCH_ARGS_SIZE = struct.calcsize(_LAUNCH_HEAD)
_COMPLETION_OFFSET = _capi.LaunchArgs.completion.offset
_COMPLETION = struct.Struct("<QQ")
_BUFFER_POINTER = operator.attrgetter("ptr")
_DIM_END = 1 << 31  # a grid or block dimension is in [1, 2^31)
_addressof = ctypes.addressof
assert _LAUNCH_ARGS_SIZE == ctypes.sizeof(_capi.LaunchArgs) and _capi.LaunchArgs.args.offset == 56


class Kernel:
    """A kernel of a Module: `launch(stream, grid, block, *args)` checks the arguments against its parameters."""

    def __init__(self, module, handle, name, param_sizes):
        self.module = module
        self.handle = handle
        self.name = name
        self.param_sizes = param_sizes
        # Values follow the kernel_arg array, each aligned to its size (at most 8).
        self._values_offset = _LAUNCH_ARGS_SIZE + 16 * len(param_sizes)
        off, self._pads, self._offsets = self._values_offset, [], []
        for size in param_sizes:
            align = min(8, size) if size in (1, 2, 4, 8) else 8
            pad = -off % align
            self._pads.append(pad)
            self._offsets.append(off + pad)
            off += pad + size
        self._blob_size = off
        self._blob_type = ctypes.c_char * off  # zero-filled when made, as create_string_buffer's
        self._plans = {}
        # (value address, size) pairs, addresses relative to the blob's start.
        self._kargs_template = [x for o, sz in zip(self._offsets, param_sizes) for x in (o, sz)]
        self._launch = _capi.function("launch")
        self._head_format = _LAUNCH_HEAD + "QQ" * len(param_sizes)
        self._head = struct.Struct(self._head_format)

    def _order_inputs(self, stream, args, indices):
        # The CUDA array interface (v3) names the stream its producer wrote on, and a PyTorch tensor belongs to
        # PyTorch's current stream: the launch's stream waits for those on the device first.
        from ._memory import _order_after
        for i in indices:
            value = args[i]
            if hasattr(value, "data_ptr") and getattr(value, "is_cuda", False):
                torch = sys.modules["torch"]
                _order_after(stream, torch.cuda.current_stream(value.device).cuda_stream)
                continue
            cai = getattr(value, "__cuda_array_interface__", None)
            if cai is not None and cai.get("stream") is not None:
                _order_after(stream, cai["stream"])

    def _plan(self, args):
        """For arguments of these types: one struct.Struct for the launch (its header, the kernel_arg array and the
        values), the converter of each value, which arguments are cuasync buffers (their uses are noted) and which
        are a framework's memory (its producer stream is waited on). None for the general path (ctypes values,
        numpy scalars, bytes)."""
        from ._memory import Buffer
        fmt, convs, buffers, foreign = "", [], [], []
        for i, (size, value, pad) in enumerate(zip(self.param_sizes, args, self._pads)):
            t = type(value)
            if t is int and size in _INT:
                fmt += "x" * pad + _INT[size]
                convs.append(None)
            elif t is float and size in _FLOAT:
                fmt += "x" * pad + _FLOAT[size]
                convs.append(None)
            elif size == 8 and t is Buffer:
                fmt += "x" * pad + "Q"
                convs.append(_BUFFER_POINTER)
                buffers.append(i)
            elif size == 8 and t not in (bool, bytes, bytearray) and _pointer_of(value) is not None:
                fmt += "x" * pad + "Q"
                convs.append(_pointer_of)
                foreign.append(i)
            else:
                return None
        # No converter at all (ints and floats only): the arguments are packed as they are.
        convs = tuple(convs) if any(c is not None for c in convs) else None
        return struct.Struct(self._head_format + fmt), convs, tuple(buffers), tuple(foreign)

    @staticmethod
    def _general_uses(args):
        """(the indices of cuasync buffers, those of a framework's memory) among `args`, without a plan."""
        buffers = tuple(i for i, v in enumerate(args) if hasattr(v, "note_use"))
        foreign = tuple(i for i, v in enumerate(args) if i not in buffers and not isinstance(v, (int, float, bytes))
                        and _pointer_of(v) is not None)
        return buffers, foreign

    def _general_values(self, args):
        return b"".join(b"\0" * pad + pack_argument(self.name, i, size, value)
                        for i, (size, value, pad) in enumerate(zip(self.param_sizes, args, self._pads)))

    def _blob(self, stream, grid, block, args, shared_memory, flags):
        """The launch's arguments struct, its kernel_arg array and the argument values, laid out in one buffer (a
        single pack): [cuasync_launch_args][kernel_arg x n][values at their offsets]. Checked: count, sizes, ranges,
        types. Returns it with the indices of the cuasync buffers and of a framework's memory among `args`."""
        n = len(self.param_sizes)
        if len(args) != n:
            raise errors.InvalidArgumentError(f"kernel '{self.name}' takes {n} parameter(s), {len(args)} given")
        # Inline for the usual int (on every launch); _dims checks and converts the rest.
        g = (grid, 1, 1) if type(grid) is int and 0 < grid < _DIM_END else _dims(grid)
        b = (block, 1, 1) if type(block) is int and 0 < block < _DIM_END else _dims(block)
        blob = self._blob_type()
        base = _addressof(blob)
        head = (_LAUNCH_ARGS_SIZE, stream.handle, self.handle, *g, *b, shared_memory,
                base + _LAUNCH_ARGS_SIZE if n else 0, n, 0, 0, 0, 0, flags)
        kargs = self._kargs_template.copy()
        kargs[::2] = [base + o for o in self._offsets]
        plan = self._plans.get(tuple(map(type, args)), False)
        if plan is False:
            plan = self._plans[tuple(map(type, args))] = self._plan(args)
        try:
            if plan is None:
                raise struct.error("general path")
            packer, convs = plan[0], plan[1]
            packer.pack_into(blob, 0, *head, *kargs,
                             *(args if convs is None else [v if c is None else c(v) for c, v in zip(convs, args)]))
            return blob, plan[2], plan[3]
        except (struct.error, OverflowError):  # a type the plan does not cover, or a value out of range
            values = self._general_values(args)
            try:
                self._head.pack_into(blob, 0, *head, *kargs)
            except struct.error:
                raise errors.InvalidArgumentError(f"kernel '{self.name}': grid {g}, block {b} and shared memory "
                                                  f"{shared_memory} must be unsigned 32-bit values") from None
            ctypes.memmove(base + self._values_offset, values, len(values))
        return (blob, *self._general_uses(args))

    def launch(self, stream, grid, block, *args, shared_memory=0):
        """Enqueues the kernel on `stream` (a Stream, or any framework stream). Bad arguments raise here, before
        anything reaches the GPU. In a coroutine, `await` the result (a full stream makes it wait its turn without
        blocking the loop); outside one, the call returns a Pending (`.wait()`) and waits like the driver when the
        stream is full."""
        s = stream if type(stream) is Stream else as_stream(stream, self.module.runtime)
        blob, buffers, foreign = self._blob(s, grid, block, args, shared_memory, 0)
        for i in buffers:
            args[i].note_use(s)
        if foreign:
            self._order_inputs(s, args, foreign)
        address = _addressof(blob)
        launch = self._launch

        def enqueue(queue, token):
            _COMPLETION.pack_into(blob, _COMPLETION_OFFSET, queue, token)
            err = launch(address)
            return _capi.code_of(err) if err else 0
        return _completion.issue(s, lambda: f"kernel '{self.name}' on {s!r}", enqueue, keep=None, tracked=True)

    def launch_untracked(self, stream, grid, block, *args, shared_memory=0):
        """Enqueues the kernel with no completion, no admission place and no event: for a stream its framework
        orders (PyTorch's current stream in a custom op, XLA's) and for streams being captured into a CUDA graph.
        Arguments are checked as in `launch`. Like any driver launch it can block when the hardware queue is full."""
        s = stream if type(stream) is Stream else as_stream(stream, self.module.runtime)
        blob, buffers, _ = self._blob(s, grid, block, args, shared_memory, _capi.LAUNCH_UNTRACKED)
        for i in buffers:
            args[i].note_use(s, order=False)
        if _capi.call_code_at("launch", ctypes.addressof(blob)):
            raise errors.BusyError(f"kernel '{self.name}': untracked launch refused as busy")  # never expected

    def __repr__(self):
        return f"<cuasync.Kernel {self.name}({', '.join(str(s) for s in self.param_sizes)} bytes)>"


def grid_for(n, block=256):
    """The number of blocks of `block` threads that cover `n` items."""
    return max(1, math.ceil(n / block))
