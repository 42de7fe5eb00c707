// hcasim-trace-samples FILE: every trace event of hca-model/trace-events
// written once, all fields present, through the generated emitters.  The
// host test TraceSchema reads FILE with the Python tools' parser and checks
// each line against the schema: what the model writes is what the table
// declares.
#include <cstdio>
#include <string>

#include "trace/trace.h"
#include "trace_events.gen.h"

int main(int argc, char **argv) {
    if (argc != 2) {
        std::fputs("usage: hcasim-trace-samples FILE\n", stderr);
        return 2;
    }
    hca::Tracer t;
    std::string err;
    if (!t.open(argv[1], 0, &err)) {
        std::fprintf(stderr, "%s\n", err.c_str());
        return 1;
    }
    t.set_mask(~0u);
    hca::tev::emit_samples(t);
    t.flush();
    return 0;
}
