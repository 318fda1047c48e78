"""`oop replay`: replay a disordered file through a window aggregation from the command line."""
