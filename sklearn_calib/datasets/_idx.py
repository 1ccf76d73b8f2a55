"""Reader for the IDX format of the MNIST family (optionally gzip-compressed)."""

import gzip

import numpy as np

_IDX_DTYPES = {
    0x08: np.dtype(np.uint8),
    0x09: np.dtype(np.int8),
    0x0B: np.dtype(">i2"),
    0x0C: np.dtype(">i4"),
    0x0D: np.dtype(">f4"),
    0x0E: np.dtype(">f8"),
}


def read_idx(path):
    """Read an IDX file (``.gz`` files are decompressed) into a numpy array.

    The header is two zero bytes, a type code, the number of dimensions and one big-endian
    32-bit size per dimension; the data must hold exactly the product of the sizes.

    Parameters
    ----------
    path : str or pathlib.Path
        The file.

    Returns
    -------
    array : ndarray
        The data, of the file's shape and dtype (native byte order).
    """
    path = str(path)
    opener = gzip.open if path.endswith(".gz") else open
    try:
        with opener(path, "rb") as stream:
            content = stream.read()
    except (EOFError, gzip.BadGzipFile) as exc:
        raise ValueError(f"Expected a readable gzip-compressed IDX file at {path}: {exc}") from exc
    if len(content) < 4 or content[:2] != b"\x00\x00" or content[2] not in _IDX_DTYPES:
        raise ValueError(
            f"Expected an IDX file (magic bytes 00 00 <type> <ndim>) at {path}, "
            f"got first bytes {content[:4].hex(' ') or 'none'}."
        )
    dtype = _IDX_DTYPES[content[2]]
    ndim = content[3]
    header = 4 + 4 * ndim
    if len(content) < header:
        raise ValueError(f"Expected {header} header bytes in {path}, got {len(content)}.")
    shape = tuple(int(size) for size in np.frombuffer(content, ">u4", ndim, offset=4))
    expected = header + int(np.prod(shape)) * dtype.itemsize
    if len(content) != expected:
        raise ValueError(
            f"Expected {expected} bytes in {path} for an IDX array of shape {shape}, "
            f"got {len(content)}; the file is truncated or corrupt."
        )
    data = np.frombuffer(content, dtype, offset=header).reshape(shape)
    return data.astype(dtype.newbyteorder("="), copy=True)
