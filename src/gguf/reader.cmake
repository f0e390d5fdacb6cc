# GGUF reader and writer (owner: format work).
