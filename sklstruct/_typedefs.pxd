# The C type names shared by every compiled module of sklstruct (declarations only).
# Arrays handed to compiled code use these widths: int64 offsets and CSR row pointers, int32
# feature indices, float64 values.
ctypedef signed char int8_t
ctypedef unsigned char uint8_t
ctypedef signed int int32_t
ctypedef signed long long int64_t
ctypedef unsigned long long uint64_t
ctypedef double float64_t
ctypedef Py_ssize_t intp_t
ctypedef signed short int16_t
