# Per-sentence inside-outside routines of _cky_inside.pyx (weighted context-free grammars over
# binary trees), shared with other compiled modules. The grammar and the span layout are those
# of _cky.pxd, documented at the top of _cky.pyx.
from sklstruct._inference._cky cimport Grammar, _n_spans
from sklstruct._typedefs cimport intp_t


cdef double _cky_inside(const double* span_scores, intp_t n, const Grammar* grammar,
                        double* work) noexcept nogil

cdef double _cky_inside_outside(const double* span_scores, intp_t n, const Grammar* grammar,
                                double* work, double* marginals,
                                double* rule_counts) noexcept nogil


cdef inline intp_t _inside_size(intp_t n, intp_t n_labels, intp_t n_symbols) noexcept nogil:
    """Doubles of the ``work`` of :func:`_cky_inside`."""
    return _n_spans(n) * (3 * n_symbols + 1) + 2 * n_symbols + n_labels


cdef inline intp_t _inside_outside_size(intp_t n, intp_t n_labels, intp_t n_symbols,
                                        intp_t n_rules) noexcept nogil:
    """Doubles of the ``work`` of :func:`_cky_inside_outside`."""
    return (_inside_size(n, n_labels, n_symbols) + _n_spans(n) * (2 * n_symbols + 1)
            + n_symbols + n_labels + n_rules)
