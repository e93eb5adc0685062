// An ordinary shared library without the ptrain entry point.
extern "C" int not_a_plugin_answer() { return 42; }
