"""The shader core's fast paths, on by default. Each one is an exact shortcut of a general path (same registers,
memory, faults); `enabled = False` forces the general paths everywhere, which tests/test_shader_fast_paths.py
uses to compare the two bit for bit. Read at run time (and when a fresh core compiles an instruction), so a test
switches it for a fresh device."""
enabled = True
