"""`oop experiments`: IOP-vs-OOP studies reproduced with tables and plots."""
