"""Operation descriptions (ops/*.yaml) and the generators that read them."""
