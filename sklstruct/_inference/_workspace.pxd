# Helpers of the compiled kernels' workspaces: the larger of two sizes, and growing a block.

from libc.stdlib cimport realloc

from sklstruct._typedefs cimport intp_t


cdef inline intp_t _larger(intp_t a, intp_t b) noexcept nogil:
    return a if a > b else b


cdef inline bint _resize(void** block, size_t size) noexcept nogil:
    """``realloc`` in place of ``block[0]``; False (``block[0]`` unchanged) on failure."""
    cdef void* grown = realloc(block[0], size)
    if grown == NULL:
        return False
    block[0] = grown
    return True
