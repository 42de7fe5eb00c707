#include "alloc_count.h"

#include <cstddef>
#include <cstdlib>
#include <new>

namespace {

thread_local bool t_counting = false;
thread_local uint64_t t_count = 0;

void counted() {
    if (t_counting) {
        ++t_count;
    }
}

}  // namespace

namespace hcatest {

void AllocCount::start() {
    t_count = 0;
    t_counting = true;
}

uint64_t AllocCount::stop() {
    t_counting = false;
    return t_count;
}

}  // namespace hcatest

// AddressSanitizer: GCC says so with __SANITIZE_ADDRESS__, clang with
// __has_feature.
#if defined(__SANITIZE_ADDRESS__)
#define HCASIM_ASAN 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define HCASIM_ASAN 1
#endif
#endif

#if defined(HCASIM_ASAN)

// Under AddressSanitizer its own operator new stays (it checks new/delete
// pairs); its allocator reports every allocation, malloc's too, to a hook
// (sanitizer/allocator_interface.h, declared here: GCC does not ship the
// header).
extern "C" int __sanitizer_install_malloc_and_free_hooks(void (*malloc_hook)(const volatile void *, size_t),
                                                         void (*free_hook)(const volatile void *));

namespace {

void on_malloc(const volatile void *, size_t) {
    counted();
}
void on_free(const volatile void *) {}
[[maybe_unused]] const int g_hooked = __sanitizer_install_malloc_and_free_hooks(on_malloc, on_free);

}  // namespace

#else

// The replaceable allocation functions ([new.delete.single]); the array and
// nothrow forms of libstdc++ call these.
void *operator new(std::size_t n) {
    counted();
    if (void *p = std::malloc(n ? n : 1)) {
        return p;
    }
    throw std::bad_alloc();
}

void operator delete(void *p) noexcept {
    std::free(p);
}

void operator delete(void *p, std::size_t) noexcept {
    std::free(p);
}

#endif
