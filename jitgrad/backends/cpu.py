"""jitgrad.backends.cpu: the CPU's capability as PyTorch names it."""


def get_cpu_capability():
    return "DEFAULT"
