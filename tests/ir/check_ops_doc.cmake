# Fails when docs/ops.md differs from what the op registry generates.
execute_process(COMMAND "${TOOL}" OUTPUT_FILE "${ACTUAL}" RESULT_VARIABLE rc)
if(NOT rc EQUAL 0)
  message(FATAL_ERROR "ir_ops_doc failed (${rc})")
endif()
execute_process(COMMAND ${CMAKE_COMMAND} -E compare_files "${EXPECTED}" "${ACTUAL}" RESULT_VARIABLE differs)
if(differs)
  message(FATAL_ERROR "docs/ops.md is out of date with the op registry; regenerate it with:\n"
                      "  build/release/tests/ir_ops_doc > docs/ops.md")
endif()
