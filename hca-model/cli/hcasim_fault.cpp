// hcasim-fault: the fault kinds of the model and a check of fault specs
// without a running VM, for ./hcasim fault --list and for --fault, which is
// checked before anything boots.
//
//   hcasim-fault kinds          every kind, its arguments and what it does
//   hcasim-fault check SPEC...  exit 1 and a message for the first bad one
#include <cstdio>
#include <cstring>

#include "fault/faults.h"

int main(int argc, char **argv) {
    if (argc == 2 && std::strcmp(argv[1], "kinds") == 0) {
        std::fputs(hca::FaultTable::kinds().c_str(), stdout);
        return 0;
    }
    if (argc >= 3 && std::strcmp(argv[1], "check") == 0) {
        for (int i = 2; i < argc; ++i) {
            try {
                hca::parse_fault(argv[i]);
            } catch (const hca::FaultSpecError &e) {
                std::fprintf(stderr, "fault '%s': %s\n", argv[i], e.what.c_str());
                return 1;
            }
        }
        return 0;
    }
    std::fputs("usage: hcasim-fault kinds | check SPEC...\n", stderr);
    return 2;
}
