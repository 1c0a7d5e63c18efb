"""`import traceml` is not this package's name (nor TraceML 0.5.0's): the
same guidance as 0.5.0 gives, as an ImportError."""

raise ImportError(
    "The 'traceml' import path is not supported. "
    "Use 'import traceml_ai as traceml' instead."
)
