"""Tensor indexing as NumPy and PyTorch users write it: x[0], x[:, 1:3], x[..., None],
x[-1], x[ids] (one integer tensor or array), staged as slices, gathers and reshapes."""

from . import _kiln

_END = 2**63 - 1  # a stop past any end: kiln.slice clamps it


def _error(message):
    return _kiln.UserError("kiln.Tensor indexing: " + message)


def getitem(x, key):
    if not isinstance(key, tuple):
        key = (key,)
    ellipses = sum(1 for k in key if k is Ellipsis)  # `is`: arrays in keys have no ==
    if ellipses > 1:
        raise _error("an index can hold one ... only")
    used = sum(1 for k in key if k is not None and k is not Ellipsis)
    if used > x.rank:
        raise _error(f"{used} indices for a tensor of rank {x.rank} ({x.layout})")
    if ellipses == 0:
        key = key + (Ellipsis,)
    at = next(i for i, k in enumerate(key) if k is Ellipsis)
    key = key[:at] + (slice(None),) * (x.rank - used) + key[at + 1 :]

    advanced = [n for n, k in enumerate(key) if not (k is None or isinstance(k, slice))]
    if any(not isinstance(key[n], int) or isinstance(key[n], bool) for n in advanced) and (
        advanced != list(range(advanced[0], advanced[-1] + 1))
    ):
        raise _error(
            "integer and tensor indices separated by a slice or None move the indexed dims to "
            "the front in NumPy and PyTorch; index in two steps (x[0][:, ids]) to say which "
            "order you mean"
        )
    result = x
    axis = 0  # the axis of `result` the next key applies to
    final = []  # the result's dims after the reshape: dims kept, 1 for each None
    gathered = False
    for k in key:
        if k is None:
            final.append(1)
            continue
        dim = result.shape[axis]
        if isinstance(k, slice):
            step = 1 if k.step is None else int(k.step)
            if step <= 0:
                raise _error(f"slice step {step}: kiln slices take positive steps")
            start = 0 if k.start is None else int(k.start)
            stop = _END if k.stop is None else int(k.stop)
            if (start, stop, step) != (0, _END, 1):
                if not isinstance(dim, int):
                    raise _error(
                        f"axis {axis} is symbolic ({dim}): a slice of it takes the whole axis "
                        f"(:) or one index (x[:, i]); slice after kiln knows the size (stage "
                        f"with a static dim) or index it one position at a time"
                    )
                result = _kiln.slice(result, axis, start, stop, step)
            final.append(result.shape[axis])
            axis += 1
        elif isinstance(k, bool):
            raise _error("a bool index gives a shape known only from the data; use kiln.where")
        elif isinstance(k, int) or hasattr(k, "__index__") and not hasattr(k, "shape"):
            i = int(k)
            if isinstance(dim, int):
                if not -dim <= i < dim:
                    raise IndexError(
                        f"kiln.Tensor indexing: index {i} is out of range for axis {axis} of "
                        f"size {dim} ({x.layout})"
                    )
                result = _kiln.slice(result, axis, i, i + 1 if i != -1 else _END)
                axis += 1  # dropped by the final reshape
            else:  # a symbolic axis: gather_elements takes i from the end if negative,
                # and checks it when the size is known (a DeviceError naming this line)
                dims = list(result.shape)
                dims[axis] = 1
                index = _kiln.broadcast_to(_kiln.asarray(_scalar_index(i)), dims)
                picked = _kiln.gather_elements(result, index, axis)
                dims.pop(axis)
                result = _kiln.reshape(picked, dims)
        else:
            if gathered:
                raise _error("one tensor index per indexing; index again for another axis")
            gathered = True
            index = k if isinstance(k, _kiln.Tensor) else _kiln.asarray(k)
            if index.dtype == _kiln.DType.bool:
                raise _error("a bool mask gives a shape known only from the data; use kiln.where")
            result = _kiln.gather(result, index, axis)
            final.extend(index.shape)
            axis += index.rank
    final.extend(result.shape[axis:])
    if tuple(final) != tuple(result.shape):
        result = _kiln.reshape(result, final)
    return result


def _scalar_index(i):
    import numpy

    return numpy.array(i, dtype=numpy.int64)
