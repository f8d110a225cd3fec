"""Built-in methods; importing this package registers them."""
