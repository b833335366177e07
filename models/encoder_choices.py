"""The values encoder flags take, in one TensorFlow-free place: the flag parser, the spec
constructor and the encoders all check against these."""

LONG_TEXT_MODES = ("truncate", "chunk")
GRANULARITIES = ("sentence", "token")
TOKEN_UNITS = ("word", "wordpiece")
TOKEN_DTYPES = ("float32", "float16")
# The encoder's compute precisions (--precision); an export-model encoder has a graph for each
# (models/export/bert_encoder.py), other kinds compute in fp32 (their registry entries say so).
PRECISIONS = ("fp32", "bf16", "fp16")
# Where the encoder runs (--accelerator): auto is TensorFlow's own placement (a visible GPU, else
# the CPU); gpu insists on a GPU; tpu runs the encoder XLA-compiled, in fixed shapes, under
# TPUStrategy (models/accelerators.py).
ACCELERATORS = ("auto", "gpu", "tpu")
