# ctest install.find_package_consumer: installs the kiln build in KILN_BUILD_DIR into a
# scratch prefix, moves the prefix, checks that the package files name no absolute path
# and ask the consumer for no package but Threads, then configures, builds and runs the
# consumer project against the moved prefix with find_package(kiln).
# Arguments: KILN_BUILD_DIR, CONSUMER_SOURCE_DIR, WORK_DIR.
file(REMOVE_RECURSE "${WORK_DIR}")
set(installed "${WORK_DIR}/installed")
set(prefix "${WORK_DIR}/moved")
function(run)
  execute_process(COMMAND ${ARGV} RESULT_VARIABLE rc)
  if(NOT rc EQUAL 0)
    message(FATAL_ERROR "failed (${rc}): ${ARGV}")
  endif()
endfunction()
run(${CMAKE_COMMAND} --install "${KILN_BUILD_DIR}" --prefix "${installed}")
file(RENAME "${installed}" "${prefix}")  # a package must not care where it was installed

file(GLOB package_files "${prefix}/lib*/cmake/kiln/*.cmake")
if(NOT package_files)
  message(FATAL_ERROR "no CMake package files under ${prefix}/lib*/cmake/kiln")
endif()
foreach(file IN LISTS package_files)
  file(READ "${file}" text)
  # An absolute path: a quoted or separated "/word/..." that is not under the package's
  # own computed prefix (${_IMPORT_PREFIX}, ${PACKAGE_PREFIX_DIR}).
  string(REGEX MATCHALL "[\":;( ]/[A-Za-z0-9_.+-]+/[^\"; )>]*" absolute "${text}")
  if(absolute)
    message(FATAL_ERROR "${file} names absolute paths: ${absolute}")
  endif()
  foreach(where IN ITEMS "${installed}" "${KILN_BUILD_DIR}")
    string(FIND "${text}" "${where}" at)
    if(NOT at EQUAL -1)
      message(FATAL_ERROR "${file} names ${where}")
    endif()
  endforeach()
  string(REGEX MATCHALL "find_dependency\\(([A-Za-z0-9_]+)" asked "${text}")
  foreach(dependency IN LISTS asked)
    if(NOT dependency STREQUAL "find_dependency(Threads")
      message(FATAL_ERROR "${file} asks the consumer for a package kiln's headers do not need: "
                          "${dependency})")
    endif()
  endforeach()
  string(REGEX MATCH "INTERFACE_LINK_LIBRARIES \"([^\"]*)\"" links "${text}")
  if(links AND NOT CMAKE_MATCH_1 STREQUAL "Threads::Threads")
    message(FATAL_ERROR "${file}: kiln::kiln passes on links beyond Threads: ${CMAKE_MATCH_1}")
  endif()
endforeach()

run(${CMAKE_COMMAND} -S "${CONSUMER_SOURCE_DIR}" -B "${WORK_DIR}/build" -G Ninja
    -DCMAKE_BUILD_TYPE=Release "-DCMAKE_PREFIX_PATH=${prefix}")
run(${CMAKE_COMMAND} --build "${WORK_DIR}/build")
run("${WORK_DIR}/build/consumer")
