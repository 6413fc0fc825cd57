# The check for a pending signal (Ctrl-C) of the compiled loops that run without the GIL.
from cpython.exc cimport PyErr_CheckSignals

from sklstruct._typedefs cimport intp_t


cdef inline int check_signals_every(intp_t* work_since_check, intp_t work,
                                    intp_t every) except -1 nogil:
    """Count ``work`` more steps of a loop; once ``every`` steps have been counted since the
    last check, take the GIL and run the interpreter's signal handlers, so that a pending
    Ctrl-C raises KeyboardInterrupt (or a handler its own exception) in the loop."""
    work_since_check[0] += work
    if work_since_check[0] < every:
        return 0
    work_since_check[0] = 0
    with gil:
        PyErr_CheckSignals()
    return 0
