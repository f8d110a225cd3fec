"""Names of the activations the encoders accept (no torch import, so the CLI lists them fast)."""

#: Activation names accepted by `build_encoder` (resolved by PyG's ``activation_resolver``).
ACTIVATIONS = ("celu", "elu", "gelu", "leaky_relu", "mish", "prelu", "relu", "selu", "sigmoid",
               "silu", "softplus", "tanh")
