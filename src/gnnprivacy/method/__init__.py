"""The methods layer: named methods and their parameter schemas, the run context, config
resolution and the data a config names.

`registry` looks a method name up (`get_method`, `list_methods`); `spec` holds the table and
the `register_method` decorator that method modules use; `builtin` holds the built-in methods;
`config` and `resolve` turn flat values into a `RunConfig` and its resolved form; `data` loads
what a config names; `trainers` builds the estimator a method trains. Attacks, audits and the
drivers build trainers through this layer, so none of them needs the drivers.
"""
