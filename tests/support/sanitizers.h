// Whether a test binary is built with ThreadSanitizer (gcc's __SANITIZE_THREAD__, clang's
// __has_feature), for tests that scale their work down under it or tell it about code it cannot
// see. Header-only constants. Thread-safety: constants.
#pragma once

#if defined(__SANITIZE_THREAD__)
#define CELLM_THREAD_SANITIZER 1
#elif defined(__has_feature)
#if __has_feature(thread_sanitizer)
#define CELLM_THREAD_SANITIZER 1
#endif
#endif
#ifndef CELLM_THREAD_SANITIZER
#define CELLM_THREAD_SANITIZER 0
#endif

namespace cellm::testing {

inline constexpr bool kThreadSanitizer = CELLM_THREAD_SANITIZER != 0;

}  // namespace cellm::testing
