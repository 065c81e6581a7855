# Guards the rule stated in src/backend/cpu/simd_avx512.h: an object compiled with SIMD flags
# (*_avx2.cpp, *_avx512.cpp) may define global or weak symbols only inside helium::cpu::<isa>::. An inline
# function or template instantiation emitted there under a shared name (a std:: helper, a core/ inline)
# could be the one copy the linker keeps for scalar callers, and would then run AVX-512 code on a CPU
# without it.
#   cmake -DNM=<nm> -DOBJECTS=<list of object files> -P simd_symbols_check.cmake
set(checked 0)
foreach(object IN LISTS OBJECTS)
  if(NOT object MATCHES "_(avx2|avx512)\\.cpp\\.o$")
    continue()
  endif()
  set(isa ${CMAKE_MATCH_1})
  math(EXPR checked "${checked} + 1")
  execute_process(COMMAND ${NM} -C --defined-only ${object} OUTPUT_VARIABLE symbols RESULT_VARIABLE rc)
  if(NOT rc EQUAL 0)
    message(FATAL_ERROR "${NM} failed on ${object}")
  endif()
  string(REPLACE ";" "," symbols "${symbols}")
  string(REPLACE "\n" ";" symbols "${symbols}")
  foreach(line IN LISTS symbols)
    # Global (upper case) and weak/unique (u, v, w) definitions; local symbols (t, r, d, b) are private.
    if(line MATCHES "^[0-9a-f]+ ([A-Zuvw]) (.*)$")
      set(type "${CMAKE_MATCH_1}")
      set(name "${CMAKE_MATCH_2}")
      if(NOT name MATCHES "^helium::cpu::${isa}::")
        message(SEND_ERROR "${object}: symbol '${name}' (nm type ${type}) is outside helium::cpu::${isa}::")
      endif()
    endif()
  endforeach()
endforeach()
if(checked EQUAL 0)
  message(FATAL_ERROR "no *_avx2/*_avx512 objects among OBJECTS")
endif()
message(STATUS "${checked} SIMD objects define symbols only in their ISA's namespace")
