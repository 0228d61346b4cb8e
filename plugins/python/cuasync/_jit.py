# SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
"""NVRTC compiles (through cuasync's memory and disk caches), kernel packages, and checked launches."""
from __future__ import annotations

import ctypes
import math
import struct
import sys
from typing import TYPE_CHECKING, Any, Dict, Iterable, Optional, Sequence, Union

from . import _argtypes, _capi, _completion, _fastpath, errors
from ._runtime import Runtime, Stream, as_stream

if TYPE_CHECKING:
    import os


def _strings(items):
    items = [i.encode() if isinstance(i, str) else bytes(i) for i in items]
    return (ctypes.c_char_p * max(1, len(items)))(*items), len(items)


def _header_array(headers):
    """A C array of cuasync_header for a {include name: contents} dict, and its length."""
    headers = dict(headers or {})
    items = [_capi.Header(k.encode(), v.encode()) for k, v in headers.items()]
    return (_capi.Header * max(1, len(items)))(*items), len(items)


def compile(source: str, name: str = "kernel.cu", options: Iterable[str] = (), headers: Optional[Dict[str, str]] = None,
            name_expressions: Iterable[str] = (), runtime: Optional[Runtime] = None) -> Module:
    """Compiles CUDA C++ `source` with NVRTC for `runtime`'s device (default: device 0) and loads it into the
    runtime's context: this needs a GPU. To compile without one (for a named architecture, the image as bytes), use
    `cuasync.compile_to_bytes(source, arch="sm_90")`. `headers` maps include names to contents; `name_expressions`
    ("scale<float>") make template instances reachable by `Module.kernel`. A compile error raises CompileError with
    NVRTC's log. Blocks while NVRTC runs (a cache hit takes microseconds): compile before a CUDA graph capture, or in
    an executor from a coroutine."""
    runtime = runtime or Runtime.for_device(0)
    opts, n_opts = _strings(options)
    exprs, n_exprs = _strings(name_expressions)
    hdrs, n_hdrs = _header_array(headers)
    a = _capi.call("compile", _capi.CompileArgs(
        runtime=runtime.handle, name=name.encode(), source=source.encode(), options=opts, num_options=n_opts,
        headers=hdrs, num_headers=n_hdrs, name_expressions=exprs, num_name_expressions=n_exprs))
    return Module(a.module, runtime, name)


def load_package(directory: Union[str, os.PathLike[str]], runtime: Optional[Runtime] = None) -> Module:
    """Loads a kernel package (a directory with a `cuasync.manifest`), compiled for `runtime`'s device."""
    runtime = runtime or Runtime.for_device(0)
    a = _capi.call("package_load", _capi.PackageLoadArgs(runtime=runtime.handle, directory=str(directory).encode()))
    return Module(a.module, runtime, str(directory))


class Module:
    """A compiled program loaded into a runtime's context. Its kernels are valid while it lives."""

    def __init__(self, handle: int, runtime: Runtime, name: str) -> None:
        self.handle = handle
        self.runtime = runtime
        self.name = name
        self._kernels = {}

    def kernel(self, name: str) -> Kernel:
        """The kernel `name` (an extern "C" name, or a name expression given to compile)."""
        k = self._kernels.get(name)
        if k is None:
            typed = _capi.abi_version() >= (1, 4)  # an older library has no types to say (and refuses the fields)

            def get(capacity):
                sizes = (ctypes.c_size_t * capacity)()
                types = (ctypes.c_uint32 * capacity)()
                a = _capi.KernelGetArgs(module=self.handle, name=name.encode(), param_sizes=sizes,
                                        param_sizes_capacity=capacity)
                if typed:
                    a.param_types, a.param_types_capacity = types, capacity
                return _capi.call("kernel_get", a), sizes, types
            a, sizes, types = get(64)
            if a.num_params > 64:
                a, sizes, types = get(a.num_params)
            n = a.num_params
            param_types = tuple(types[i] for i in range(n)) if typed and a.typed else ()
            names = tuple(a.param_type_names[i].decode() for i in range(n)) if param_types else ()
            k = self._kernels[name] = Kernel(self, a.kernel, name, tuple(sizes[i] for i in range(n)), param_types,
                                             names)
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
    from ._memory import Buffer
    if isinstance(value, Buffer):  # by type: a failed getattr(tensor, "ptr") per tensor cost ~1 us
        return _buffer_pointer(value)
    data_ptr = getattr(value, "data_ptr", None)
    if data_ptr is not None and callable(data_ptr):
        if getattr(value, "is_cuda", True) is False and not _pinned(value):
            raise _HostMemory(getattr(value, "device", "cpu"))
        return data_ptr()
    cai = getattr(value, "__cuda_array_interface__", None)
    if cai is not None:
        return cai["data"][0]
    return None


def _is_pointer(value):
    """True for what _pointer_of converts (host tensors too: a plan by type serves their CUDA siblings)."""
    try:
        return _pointer_of(value) is not None
    except _HostMemory:
        return True


class _HostMemory(errors.InvalidArgumentError):
    """A host tensor (pageable) given for a device pointer: pack_argument names the parameter."""


def _pinned(tensor):
    is_pinned = getattr(tensor, "is_pinned", None)
    return bool(is_pinned()) if callable(is_pinned) else False


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
        try:
            ptr = _pointer_of(value)
        except _HostMemory as e:
            raise bad(f"a host tensor (device {e.args[0]}, not pinned) cannot be a device pointer: move it to the "
                      "GPU (.cuda()) or pin it") from None
        if ptr is None:
            raise bad(f"cannot pass a {type(value).__name__}")
        if size != 8:
            raise bad("a pointer needs an 8 byte parameter")
        return struct.pack("<Q", ptr)
    if len(data) != size:
        raise bad(f"the value has {len(data)} bytes")
    return data


def _typed_pointee(code):
    """True for a pointer parameter whose pointee has a type (not void*, not a class): a tensor's elements must be
    of it."""
    if not code or not _argtypes.pointers(code) or _argtypes.kind(code) == _argtypes.OPAQUE:
        return False
    return not (_argtypes.pointers(code) == 1 and _argtypes.kind(code) == _argtypes.VOID)


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


# cuasync_launch_args (ABI 1.4) as struct fields: struct_size, stream, kernel, grid[3], block[3], shared_memory_bytes,
# args, num_args, completion {queue, token, callback, user_data}, flags, arg_types (always NULL: the package checks
# types itself, before packing, so that its messages name Python's values).
_LAUNCH_HEAD = "<QQQ3I3II4xQQQQQQI4xQ"
_LAUNCH_ARGS_SIZE = struct.calcsize(_LAUNCH_HEAD)
_COMPLETION_OFFSET = _capi.LaunchArgs.completion.offset
_COMPLETION = struct.Struct("<QQ")


def _buffer_pointer(buffer):
    """A cuasync Buffer's address; StaleHandleError once it (or the buffer it views) was freed."""
    if not (buffer._parent if buffer._parent is not None else buffer).handle:
        buffer._check_alive()
    return buffer.ptr


_DIM_END = 1 << 31  # a grid or block dimension is in [1, 2^31)
_addressof = ctypes.addressof
_running_loop, _collect, _Pending = _completion.running_loop, _completion.collect, _completion.Pending
_for_loop = _completion.for_loop
assert _LAUNCH_ARGS_SIZE == ctypes.sizeof(_capi.LaunchArgs) and _capi.LaunchArgs.args.offset == 56


def _torch_current_stream(device):
    """PyTorch's current CUstream on a torch.device, as an int (without a torch.cuda.Stream object where torch
    has the raw call)."""
    torch = sys.modules["torch"]
    raw = getattr(torch._C, "_cuda_getCurrentRawStream", None)
    if raw is not None:
        return raw(device.index if device.index is not None else torch.cuda.current_device())
    return torch.cuda.current_stream(device).cuda_stream


class Kernel:
    """A kernel of a Module: `launch(stream, grid, block, *args)` checks the arguments against its parameters: their
    count and sizes, and for a C++ kernel (whose mangled name says them: `param_types`) their types, refused with
    InvalidArgumentError naming the parameter (a float for an int, a float64 tensor for a float*, an int for a
    pointer; an int for a float is converted)."""

    def __init__(self, module: Module, handle: int, name: str, param_sizes: Sequence[int],
                 param_types: Sequence[int] = (), param_type_names: Sequence[str] = ()) -> None:
        self.module = module
        self.handle = handle
        self.name = name
        self.param_sizes = param_sizes
        #: Each parameter's type code (C ABI 1.4's cuasync_arg_type) for a C++ kernel, whose mangled name says them;
        #: empty for an extern "C" kernel, whose arguments keep the size checks alone.
        self.param_types = tuple(param_types)
        #: Their C++ spellings ("const float*"), as param_types.
        self.param_type_names = tuple(param_type_names) or tuple(_argtypes.describe(t) for t in self.param_types)
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
        fast = _fastpath.get()
        # The compiled fast path: the kernel and its parameter sizes bound once, each call packs only its values.
        self._fast = fast.Launcher(handle, tuple(param_sizes), self.param_types) if fast is not None else None
        if self._fast is not None:
            # The kernel's own launch_untracked: one C call for a cuasync Stream and values it packs, this class's
            # method for the rest (a cycle, as with its module: the collector frees both).
            self._fast.bind_untracked(self, Stream, Kernel.launch_untracked, Kernel._untracked_failed)
            self.launch_untracked = self._fast.call_untracked
            # And its launch outside an event loop: one C call, then the Pending (this class's method for the rest).
            self._fast.bind_tracked(Kernel.launch, self._launched_outside_loop(), self._launch_packed, _running_loop,
                                    _collect)
            # In a running loop: launched with its completion into the loop's queue first, its future made after.
            self._fast.bind_loop(_for_loop, _completion.tokens)
            # And outside a loop, its Pending made in C (no Python frame): `what` is this kernel.
            self._fast.bind_pending(_Pending)
            self.launch = self._fast.call_tracked

    def _describe_launch(self, s):
        return f"kernel '{self.name}' on {s!r}"

    def _launched_outside_loop(self):
        """What the compiled launch calls after a launch outside an event loop: the launch's Pending (it has no
        completion of its own: it waits on its stream). The Launcher calls collect() itself, every 16th launch."""
        def launched(s):
            return _Pending(s, self, False)  # described by _describe_launch
        return launched

    def _launch_packed(self, s, args, blob, uses, loop):
        """A launch the compiled path packed into `blob`, and what it found among `args` to note first (`uses`, or
        None): the uses noted, then issued with its completion into the running `loop`'s queue (its future), or fired
        outside a loop (its Pending; a full stream retried like the driver)."""
        fast = self._fast
        if uses is not None:
            self._note_uses(s, args, uses, True)
        what = lambda: self._describe_launch(s)  # noqa: E731 - made lazily, only for an error or a dump
        if loop is not None:
            return _for_loop(loop).submit_fired(loop, s, fast.fire, blob, what)
        _collect()  # outside a loop: no completion of its own (Pending waits on the stream)
        err = fast.fire(blob, 0, 0)
        if not err:
            return _Pending(s, what, False)
        _capi.code_of(err)  # raises every error but BUSY, which _launch_fast retries like the driver
        return self._launch_fast(fast, s, blob)

    def _order_inputs(self, stream, args, indices):
        # The CUDA array interface (v3) names the stream its producer wrote on, and a PyTorch tensor belongs to
        # PyTorch's current stream: the launch's stream waits for those on the device first.
        from ._memory import _order_after
        for i in indices:
            value = args[i]
            if hasattr(value, "data_ptr") and getattr(value, "is_cuda", False):
                _order_after(stream, _torch_current_stream(value.device))
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
        types = self.param_types
        for i, (size, value, pad) in enumerate(zip(self.param_sizes, args, self._pads)):
            t = type(value)
            if types:  # a C++ kernel: what its type decides is checked once per plan, what its value does per launch
                self._check_type(i, value)
            p = types[i] if types else 0
            if t is int and size in _INT and not (p and _argtypes.kind(p) == _argtypes.FLOAT):
                fmt += "x" * pad + _INT[size]
                convs.append(None)
            elif (t is float or t is int) and size in _FLOAT:  # an int for a float parameter is converted
                fmt += "x" * pad + _FLOAT[size]
                convs.append(None)
            elif size == 8 and t is Buffer:
                fmt += "x" * pad + "Q"
                convs.append(_buffer_pointer)
                buffers.append(i)
            elif size == 8 and t not in (bool, bytes, bytearray) and _is_pointer(value):
                fmt += "x" * pad + "Q"
                convs.append(_pointer_of if not _typed_pointee(p) else self._checked_pointer(i))
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
        if self.param_types:
            args = [self._check_type(i, v) for i, v in enumerate(args)]
        return b"".join(b"\0" * pad + pack_argument(self.name, i, size, value)
                        for i, (size, value, pad) in enumerate(zip(self.param_sizes, args, self._pads)))

    def _type_error(self, i, given, hint=""):
        return errors.InvalidArgumentError(f"kernel '{self.name}' parameter {i} is {self.param_type_names[i]} but "
                                           f"the argument given is {given}{hint}")

    def _check_type(self, i, value):
        """`value` for parameter `i` of this C++ kernel (an int converted for a floating-point one), or raises
        InvalidArgumentError naming the parameter, its type and what was given."""
        p = self.param_types[i]
        pointer = _argtypes.pointers(p) > 0
        if isinstance(value, (bool, int)):
            if pointer:
                raise self._type_error(i, f"an {type(value).__name__}", " (a number, not an address: pass a Buffer, "
                                       "a tensor, an array, or ctypes.c_void_p(address))")
            if _argtypes.kind(p) != _argtypes.FLOAT:
                return value
            try:
                return float(value)
            except OverflowError:
                raise self._type_error(i, "an int too large for a float") from None
        if isinstance(value, float):
            if pointer or _argtypes.kind(p) in (_argtypes.INTEGER, _argtypes.BOOL):
                raise self._type_error(i, "a float")
            return value
        if isinstance(value, (bytes, bytearray)):
            return value  # no type: its size is checked
        if isinstance(value, (ctypes._SimpleCData, ctypes.Structure)):
            code, what = _argtypes.code_of_ctypes(value), type(value).__name__
        elif hasattr(value, "tobytes") and getattr(value, "shape", None) == ():  # a numpy scalar
            code, what = _argtypes.element_of_dtype(getattr(value, "dtype", None)), f"a {type(value).__name__}"
        else:
            from ._memory import Buffer
            if isinstance(value, Buffer):
                code, what = _argtypes.VOID_POINTER, "a Buffer"
            elif _is_pointer(value):
                element = _argtypes.element_of(value)
                code = _argtypes.element_pointer(element)
                what = f"a {type(value).__name__} of {getattr(value, 'dtype', None) or 'unknown elements'}"
            else:
                return value  # pack_argument refuses it
        if code is not None and not _argtypes.compatible(p, code):
            raise self._type_error(i, f"{_argtypes.describe(code)} ({what})")
        return value

    def _checked_pointer(self, i):
        """The converter of a framework's memory for pointer parameter `i`, whose pointee has a type: the elements'
        type checked, then the address."""
        def convert(value):
            self._check_type(i, value)
            return _pointer_of(value)
        return convert

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
                base + _LAUNCH_ARGS_SIZE if n else 0, n, 0, 0, 0, 0, flags, 0)
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
        except (struct.error, OverflowError, _HostMemory):  # a type the plan does not cover, a value out of range
            values = self._general_values(args)
            try:
                self._head.pack_into(blob, 0, *head, *kargs)
            except struct.error:
                raise errors.InvalidArgumentError(f"kernel '{self.name}': grid {g}, block {b} and shared memory "
                                                  f"{shared_memory} must be unsigned 32-bit values") from None
            ctypes.memmove(base + self._values_offset, values, len(values))
        return (blob, *self._general_uses(args))

    def launch(self, stream: Any, grid: Union[int, Sequence[int]], block: Union[int, Sequence[int]], *args: Any,
               shared_memory: int = 0) -> Any:
        """Enqueues the kernel on `stream` (a Stream, or any framework stream). Bad arguments raise here, before
        anything reaches the GPU. In a coroutine, `await` the result (a full stream makes it wait its turn without
        blocking the loop); outside one, the call returns a Pending (`.wait()`) and waits like the driver when the
        stream is full."""
        s = stream if type(stream) is Stream else as_stream(stream, self.module.runtime)
        fast = self._fast
        if fast is not None:
            loop = _running_loop()
            if loop is None:
                # Outside a loop, with nothing to note or order first: packed on the C stack and launched, one call.
                packed = fast.launch_now(s, grid, block, shared_memory, args)
                if packed is None:
                    _collect()
                    return _Pending(s, self, False)  # described by _describe_launch
                if type(packed) is int:
                    _capi.code_of(packed)  # raises every error but BUSY, retried below like the driver
                    packed = fast.pack(s, grid, block, shared_memory, 0, args)
            else:
                packed = fast.pack(s, grid, block, shared_memory, 0, args)
            if packed is not NotImplemented:
                return self._launch_packed(s, args, *packed, loop)
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
        return _completion.issue(s, lambda: self._describe_launch(s), enqueue, keep=None, tracked=True)

    def _launch_fast(self, fast, s, blob):
        """A tracked launch whose arguments the compiled fast path packed (`blob`), issued with a completion in a
        loop, or retried while the stream is full outside one."""
        fire = fast.fire

        def enqueue(queue, token):
            err = fire(blob, queue, token)
            return _capi.code_of(err) if err else 0
        return _completion.issue(s, lambda: self._describe_launch(s), enqueue, keep=None, tracked=True)

    def _note_uses(self, s, args, uses, tracked):
        """What the fast path found among `args`: (indices of cuasync buffers not last used on `s`, indices of a
        framework's memory, the
        producer stream of each of those: an int CUstream to order after, None, or False where only this package can
        tell). Buffers are noted (ordered after their home stream when `tracked`); framework memory is ordered after
        its producer's stream on tracked launches (an untracked launch's framework orders its own streams)."""
        buffers, foreign, producers = uses
        for i in buffers:
            b = args[i]
            if (b._parent if b._parent is not None else b)._streams[-1] is not s:  # else: used on `s` last already
                b.note_use(s, tracked)
        if tracked and foreign:
            from ._memory import _order_after
            done = set()  # tensors of one framework stream: ordered after it once
            for i, producer in zip(foreign, producers):
                if producer is False:
                    self._order_inputs(s, args, (i,))
                elif producer is not None and producer not in done:
                    done.add(producer)
                    _order_after(s, producer)

    def launch_untracked(self, stream: Any, grid: Union[int, Sequence[int]], block: Union[int, Sequence[int]],
                         *args: Any, shared_memory: int = 0) -> None:
        """Enqueues the kernel with no completion, no admission place and no event: for a stream its framework
        orders (PyTorch's current stream in a custom op, XLA's) and for streams being captured into a CUDA graph.
        Arguments are checked as in `launch`. Like any driver launch it can block when the hardware queue is full."""
        s = stream if type(stream) is Stream else as_stream(stream, self.module.runtime)
        fast = self._fast
        if fast is not None:
            # One C call packs on its stack and launches: None when nothing is left to do here.
            r = fast.launch_untracked(s, grid, block, shared_memory, args)
            if r is None:
                return
            if r is not NotImplemented:
                if type(r) is int:
                    return self._untracked_failed(r)
                for i in r:  # buffers whose last use was on another stream: noted, no event
                    args[i].note_use(s, order=False)
                return
        blob, buffers, _ = self._blob(s, grid, block, args, shared_memory, _capi.LAUNCH_UNTRACKED)
        for i in buffers:
            args[i].note_use(s, order=False)
        if _capi.call_code_at("launch", ctypes.addressof(blob)):
            raise errors.BusyError(f"kernel '{self.name}': untracked launch refused as busy")  # never expected

    def _untracked_failed(self, err):
        """Raises the error of a refused untracked launch (BUSY, never expected untracked, as BusyError)."""
        if _capi.code_of(err):
            raise errors.BusyError(f"kernel '{self.name}': untracked launch refused as busy")

    def __repr__(self):
        if self.param_types:
            return f"<cuasync.Kernel {self.name}({', '.join(self.param_type_names)})>"
        return f"<cuasync.Kernel {self.name}({', '.join(str(s) for s in self.param_sizes)} bytes)>"


def grid_for(n: int, block: int = 256) -> int:
    """The number of blocks of `block` threads that cover `n` items."""
    return max(1, math.ceil(n / block))
