# Warning, hardening and sanitizer flags shared by every hpcml target.
# Applied through the interface target hpcml::flags so CUDA sources are not
# handed host-only flags.
add_library(hpcml_flags INTERFACE)
add_library(hpcml::flags ALIAS hpcml_flags)

target_compile_options(hpcml_flags INTERFACE
  $<$<COMPILE_LANGUAGE:CXX,C>:-Wall -Wextra -Wpedantic -Wshadow -Wconversion -Wno-sign-conversion
    -Wnon-virtual-dtor -Wold-style-cast -Wformat=2 -fstack-protector-strong>
  $<$<AND:$<COMPILE_LANGUAGE:CXX,C>,$<BOOL:${HPCML_WERROR}>>:-Werror>)
target_compile_definitions(hpcml_flags INTERFACE
  $<$<NOT:$<CONFIG:Debug>>:_FORTIFY_SOURCE=2> _GLIBCXX_ASSERTIONS)
target_link_options(hpcml_flags INTERFACE -Wl,-z,relro,-z,now)

if(HPCML_SANITIZE)
  target_compile_options(hpcml_flags INTERFACE
    $<$<COMPILE_LANGUAGE:CXX,C>:-fsanitize=address,undefined -fno-omit-frame-pointer -fno-sanitize-recover=undefined>)
  target_link_options(hpcml_flags INTERFACE -fsanitize=address,undefined)
endif()
