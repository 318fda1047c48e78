"""What the commands share: the output, late and runtime flags (:mod:`oop.command.flags`) and
opening inputs and outputs named on a command line (:mod:`oop.command.inputs`).

``oop replay``, ``oop sql`` and ``oop replay --spark`` all use it; it sits below them in the
layers (``docs/architecture.md``) and imports no engine module until a command runs.
"""
