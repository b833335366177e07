"""The values encoder flags take, in one TensorFlow-free place: the flag parser, the spec
constructor and the encoders all check against these."""

LONG_TEXT_MODES = ("truncate", "chunk")
GRANULARITIES = ("sentence", "token")
TOKEN_UNITS = ("word", "wordpiece")
TOKEN_DTYPES = ("float32", "float16")
