"""gs:// end to end: the commands (run, pca, search) against a Cloud Storage emulator. The one
folder of tests/ that mirrors no package: what it covers crosses them all (a module's own gs://
behaviour is tested beside the module's other tests)."""
