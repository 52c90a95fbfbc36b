"""Test hooks: the NumPy emulation of the device steps, host models of the kernels, and
entry points that run the LU driver on them.  Used by tests/ and tools/; not part of the
public API."""
