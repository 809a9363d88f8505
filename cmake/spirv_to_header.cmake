# Writes a SPIR-V binary (INPUT) as a C++ header (OUTPUT) holding `inline constexpr uint32_t NAME[] = {...}`, so
# the shaders travel inside the binary: nothing to find at run time. Run by CMake in script mode (-P).
file(READ ${INPUT} hex HEX)
string(LENGTH "${hex}" len)
math(EXPR rem "${len} % 8")
if(NOT rem EQUAL 0)
  message(FATAL_ERROR "${INPUT}: ${len} hex digits is not whole 32-bit words")
endif()
# SPIR-V words are little-endian: bytes b0 b1 b2 b3 make 0xb3b2b1b0. One regular expression over the whole file (a
# loop of string(SUBSTRING) copied the file per word: half a minute for each 160 KiB matmul_*_registers shader).
string(REGEX REPLACE "(..)(..)(..)(..)" "0x\\4\\3\\2\\1u," words "${hex}")
file(WRITE ${OUTPUT} "// Generated from ${INPUT} by cmake/spirv_to_header.cmake: do not edit.\n#pragma once\n#include <cstdint>\ninline constexpr uint32_t ${NAME}[] = {${words}};\n")
