# labkit_add_lab(): the one way a lab is built.
#
#   labkit_add_lab(ID 01
#                  SOURCES matmul.cu            # the student's files, relative to student/ (and solutions/NN_topic/)
#                  TESTS tests/gates.cpp ...    # Catch2 gates, compiled once, linked against each tree
#                  [BENCH bench/bench.cpp ...]  # size sweep writing CSV, linked against each tree
#                  [LIBS CUDA::cublas ...]      # imported targets the implementation needs
#                  [CUDA_FLAGS --extended-lambda ...]  # extra nvcc flags (targets and the grading recipe)
#                  [LAUNCHER mpirun -np 4 ...]          # how a gate binary is started (CTest and the recipe's
#                                                      # "launcher", which the grader puts in front of it)
#                  [MULTI_GPU_GATES step2.speed ...])   # gates that need two GPUs: they skip (with the reason) on
#                                                      # a one-GPU machine, where LABS_REQUIRE_GPU fails other skips
#
# For each tree (student/, and solutions/NN_topic/ when it exists) it makes
#   labNN_<tree>          static library of the implementation
#   labNN_gates_<tree>    the gate binary (Catch2 with labkit's main and result channel)
#   labNN_bench_<tree>    the bench (when BENCH is given)
#   labNN_skeleton        the skeleton's objects (the grader links one in place of a step that fails to compile)
#   labNN_grading         everything a submission is linked with (gate objects, skeleton, labkit)
# registers each gate of rubric.toml with CTest (labels: labNN, the tree, and the kind: cpu / correctness / speed), writes
# build/grading/labNN.json, the recipe the grader uses to compile a submission's files against the prebuilt gates.
# SOURCES lists one file per step (stepK_<what>.cu, in step order) plus any file that is no step of its own.
# Gates in tests/hidden/ are added automatically; the student release drops that folder.

# The grader compiles a submission's files with the build's own compile command (compile_commands.json, read by
# grader/src/recipe.cpp), so that ctest and labgrade compile a file identically.
if(NOT DEFINED CMAKE_EXPORT_COMPILE_COMMANDS)
  set(CMAKE_EXPORT_COMPILE_COMMANDS ON)
endif()
if(NOT CMAKE_EXPORT_COMPILE_COMMANDS)
  message(FATAL_ERROR "CMAKE_EXPORT_COMPILE_COMMANDS is OFF: labgrade takes its compile commands from "
                      "compile_commands.json (the presets turn it on)")
endif()

function(_labkit_json_list out)
  set(items)
  foreach(x IN LISTS ARGN)
    list(APPEND items "\"${x}\"")
  endforeach()
  list(JOIN items ", " joined)
  set(${out} "[${joined}]" PARENT_SCOPE)
endfunction()

# tools/labkit_rubric: labkit's own rubric parser as a host program, built once per build folder at configure
# time (and again when its sources change), so that CMake never parses TOML itself.
function(_labkit_rubric_tool out)
  set(exe ${CMAKE_BINARY_DIR}/labkit_rubric_tool/labkit_rubric)
  set(sources ${PROJECT_SOURCE_DIR}/tools/labkit_rubric.cpp ${PROJECT_SOURCE_DIR}/common/src/rubric.cpp)
  set(stale FALSE)
  foreach(s IN LISTS sources ITEMS ${PROJECT_SOURCE_DIR}/common/include/labkit/rubric.h)
    if(NOT EXISTS ${exe} OR ${s} IS_NEWER_THAN ${exe})
      set(stale TRUE)
    endif()
  endforeach()
  if(stale)
    try_compile(ok ${CMAKE_BINARY_DIR}/labkit_rubric_tool/build
                SOURCES ${sources}
                CMAKE_FLAGS "-DINCLUDE_DIRECTORIES=${PROJECT_SOURCE_DIR}/common/include;${LABS_TOMLPP_INCLUDE_DIR}"
                COMPILE_DEFINITIONS -DTOML_HEADER_ONLY=1 -DTOML_EXCEPTIONS=1
                CXX_STANDARD 17 CXX_STANDARD_REQUIRED ON
                OUTPUT_VARIABLE log
                COPY_FILE ${exe})
    if(NOT ok)
      message(FATAL_ERROR "building tools/labkit_rubric.cpp (the rubric parser CMake uses) failed:\n${log}")
    endif()
  endif()
  set(${out} ${exe} PARENT_SCOPE)
endfunction()

# Gate ids and kinds of a rubric.toml, in rubric order, as labkit parses them.
function(_labkit_rubric_gates rubric out_ids out_kinds)
  if(NOT EXISTS ${rubric})
    message(FATAL_ERROR "${rubric} is missing: every lab needs a rubric listing its gates")
  endif()
  _labkit_rubric_tool(tool)
  execute_process(COMMAND ${tool} ${rubric} OUTPUT_VARIABLE out ERROR_VARIABLE err RESULT_VARIABLE rc)
  if(NOT rc EQUAL 0)
    message(FATAL_ERROR "${rubric}: ${err}")
  endif()
  string(REGEX REPLACE "\n$" "" out "${out}")
  string(REPLACE "\n" ";" lines "${out}")
  set(ids)
  set(kinds)
  foreach(line IN LISTS lines)
    # Ids become CTest names and list items: the characters of the gate id convention only.
    if(NOT line MATCHES "^([A-Za-z0-9_.-]+) (cpu|correctness|speed) (hidden|visible)$")
      message(FATAL_ERROR "${rubric}: gate `${line}`: an id may use letters, digits, '.', '_' and '-' only")
    endif()
    list(APPEND ids ${CMAKE_MATCH_1})
    list(APPEND kinds ${CMAKE_MATCH_2})
  endforeach()
  set(${out_ids} ${ids} PARENT_SCOPE)
  set(${out_kinds} ${kinds} PARENT_SCOPE)
endfunction()

# The grading recipe build/grading/labNN.json (docs/CONVENTIONS.md, "Grading recipe"): which files a submission
# provides, which objects and libraries its files are linked with, the skeleton objects linked in place of a step
# that does not compile or is missing, and where the build's compile command of each student file is.
#   _labkit_write_recipe(OUTPUT file ID NN NAME NN_topic LAB_DIR dir SOURCES f.cu...
#                        GATE_OBJS target SKELETON target GRADING target STUDENT_GATES target
#                        [SOLUTION_GATES target] [LIBS imported targets...])
function(_labkit_write_recipe)
  cmake_parse_arguments(R "" "OUTPUT;ID;NAME;LAB_DIR;SKELETON_DIR;GATE_OBJS;SKELETON;GRADING;STUDENT_GATES;SOLUTION_GATES"
                        "SOURCES;LIBS;LAUNCHER" ${ARGN})
  set(lib_files)
  foreach(l IN LISTS R_LIBS)
    get_target_property(l_type ${l} TYPE)
    if(l_type STREQUAL "INTERFACE_LIBRARY")  # e.g. MPI::MPI_CXX: library files, no file of its own (its include
      get_target_property(l_libs ${l} INTERFACE_LINK_LIBRARIES)  # folders reach the compile commands)
      foreach(f IN LISTS l_libs)
        if(f)
          list(APPEND lib_files ${f})
        endif()
      endforeach()
    else()
      list(APPEND lib_files "$<TARGET_FILE:${l}>")
    endif()
  endforeach()
  _labkit_json_list(sources_json ${R_SOURCES})
  _labkit_json_list(launcher_json ${R_LAUNCHER})
  _labkit_json_list(libs_json
    $<TARGET_FILE:labkit_gates_main> $<TARGET_FILE:labkit_gates> $<TARGET_FILE:labkit>
    $<TARGET_LINKER_FILE:Catch2::Catch2> ${lib_files} $<TARGET_FILE:CUDA::cublas> $<TARGET_FILE:CUDA::cusparse>
    $<TARGET_FILE:CUDA::cupti> $<TARGET_FILE:CUDA::cudart>
    -Wl,-rpath,${CUDAToolkit_LIBRARY_DIR} -Wl,-rpath,$<TARGET_FILE_DIR:CUDA::cupti> -lpthread -ldl -lrt)
  if(R_SOLUTION_GATES)
    set(solution_exe "$<$<TARGET_EXISTS:${R_SOLUTION_GATES}>:$<TARGET_FILE_DIR:${R_STUDENT_GATES}>/${R_SOLUTION_GATES}>")
    set(solution_target "$<$<TARGET_EXISTS:${R_SOLUTION_GATES}>:${R_SOLUTION_GATES}>")
  endif()
  file(GENERATE OUTPUT ${R_OUTPUT} CONTENT
"{
  \"lab\": \"${R_ID}\",
  \"name\": \"${R_NAME}\",
  \"lab_dir\": \"${R_LAB_DIR}\",
  \"rubric\": \"${R_LAB_DIR}/rubric.toml\",
  \"student_sources\": ${sources_json},
  \"compile_commands\": \"${CMAKE_BINARY_DIR}/compile_commands.json\",
  \"compile_source_dir\": \"${R_LAB_DIR}/student\",
  \"skeleton_dir\": \"${R_SKELETON_DIR}\",
  \"skeleton_objects\": [\"$<JOIN:$<TARGET_OBJECTS:${R_SKELETON}>,\", \">\"],
  \"gate_objects\": [\"$<JOIN:$<TARGET_OBJECTS:${R_GATE_OBJS}>,\", \">\"],
  \"link\": [\"${CMAKE_CXX_COMPILER}\"],
  \"link_libraries\": ${libs_json},
  \"launcher\": ${launcher_json},
  \"grading_target\": \"${R_GRADING}\",
  \"student_gates\": \"$<TARGET_FILE:${R_STUDENT_GATES}>\",
  \"student_target\": \"${R_STUDENT_GATES}\",
  \"solution_gates\": \"${solution_exe}\",
  \"solution_target\": \"${solution_target}\"
}
")
endfunction()

# The skeleton of a lab: labs/NN_topic/.skeleton/ in a student release (labgrade release writes a pristine copy
# there, because the student edits student/ itself), else student/ (the instructor's tree, where student/ is the
# skeleton). Compiled once into an object library whose objects the grader links in place of a step that does
# not compile or is missing; `grading` names a target that builds everything a submission is linked with.
function(_labkit_add_skeleton lab_dir sources skeleton_target grading_target out_dir)
  set(dir ${lab_dir}/student)
  if(IS_DIRECTORY ${lab_dir}/.skeleton)
    set(dir ${lab_dir}/.skeleton)
  endif()
  list(TRANSFORM sources PREPEND ${dir}/ OUTPUT_VARIABLE files)
  add_library(${skeleton_target} OBJECT ${files})
  target_include_directories(${skeleton_target} PRIVATE ${lab_dir})
  target_link_libraries(${skeleton_target} PRIVATE labkit ${ARGN})
  add_custom_target(${grading_target})
  set(${out_dir} ${dir} PARENT_SCOPE)
endfunction()

function(labkit_add_lab)
  cmake_parse_arguments(LAB "" "ID" "SOURCES;TESTS;BENCH;LIBS;CUDA_FLAGS;LAUNCHER;MULTI_GPU_GATES" ${ARGN})
  get_filename_component(lab_name ${CMAKE_CURRENT_SOURCE_DIR} NAME)
  set(id ${LAB_ID})
  set(lab_dir ${CMAKE_CURRENT_SOURCE_DIR})
  set(solution_dir ${PROJECT_SOURCE_DIR}/solutions/${lab_name})

  file(GLOB hidden_tests ${lab_dir}/tests/hidden/*.cpp ${lab_dir}/tests/hidden/*.cu)
  set(gate_info ${CMAKE_CURRENT_BINARY_DIR}/lab${id}_gate_info.cpp)
  file(WRITE ${gate_info}.in
    "// generated by labkit_add_lab(): which lab this gate binary is, and where its rubric lives\n"
    "namespace labkit::detail {\n"
    "extern const char* const gate_lab_id;\nextern const char* const gate_default_rubric;\n"
    "const char* const gate_lab_id = \"${id}\";\n"
    "const char* const gate_default_rubric = \"${lab_dir}/rubric.toml\";\n}\n")
  configure_file(${gate_info}.in ${gate_info} COPYONLY)

  # The gates: compiled once, linked against every tree (and by the grader against each submission).
  add_library(lab${id}_gate_objs OBJECT ${LAB_TESTS} ${hidden_tests} ${gate_info})
  target_include_directories(lab${id}_gate_objs PRIVATE ${lab_dir} ${lab_dir}/tests)
  target_link_libraries(lab${id}_gate_objs PRIVATE labkit_gates Catch2::Catch2 ${LAB_LIBS})
  target_compile_options(lab${id}_gate_objs PRIVATE "$<$<COMPILE_LANGUAGE:CUDA>:${LAB_CUDA_FLAGS}>")

  _labkit_rubric_gates(${lab_dir}/rubric.toml gate_ids gate_kinds)
  set_property(DIRECTORY APPEND PROPERTY CMAKE_CONFIGURE_DEPENDS ${lab_dir}/rubric.toml)
  set(trees student)
  if(LABS_BUILD_SOLUTIONS AND EXISTS ${solution_dir})
    list(APPEND trees solution)
  endif()
  foreach(tree IN LISTS trees)
    if(tree STREQUAL "student")
      set(src_dir ${lab_dir}/student)
    else()
      set(src_dir ${solution_dir})
    endif()
    list(TRANSFORM LAB_SOURCES PREPEND ${src_dir}/ OUTPUT_VARIABLE impl_sources)
    add_library(lab${id}_${tree} STATIC ${impl_sources})
    target_include_directories(lab${id}_${tree} PUBLIC ${lab_dir})
    target_link_libraries(lab${id}_${tree} PUBLIC labkit ${LAB_LIBS})
    target_compile_options(lab${id}_${tree} PRIVATE "$<$<COMPILE_LANGUAGE:CUDA>:-lineinfo;${LAB_CUDA_FLAGS}>")

    add_executable(lab${id}_gates_${tree} $<TARGET_OBJECTS:lab${id}_gate_objs>)
    target_link_libraries(lab${id}_gates_${tree} PRIVATE lab${id}_${tree} labkit_gates_main labkit_gates Catch2::Catch2)

    # One CTest test per rubric gate, so that labels (lab, tree, kind) and the rubric can never disagree: a
    # gate in the rubric that the binary lacks fails ("No test cases matched").
    foreach(gate IN LISTS gate_ids)
      list(FIND gate_ids ${gate} pos)
      list(GET gate_kinds ${pos} kind)
      add_test(NAME lab${id}.${tree}.${gate} COMMAND ${LAB_LAUNCHER} $<TARGET_FILE:lab${id}_gates_${tree}> "${gate}")
      set_tests_properties(lab${id}.${tree}.${gate} PROPERTIES LABELS "lab${id};${tree};${kind}" TIMEOUT 300)
      if(NOT LABS_REQUIRE_GPU OR gate IN_LIST LAB_MULTI_GPU_GATES)
        set_tests_properties(lab${id}.${tree}.${gate} PROPERTIES SKIP_RETURN_CODE 4)  # Catch2: all skipped
      endif()
      if(kind STREQUAL "speed")
        set_tests_properties(lab${id}.${tree}.${gate} PROPERTIES RUN_SERIAL TRUE)  # timings get the GPU alone
      endif()
    endforeach()

    if(LAB_BENCH)
      add_executable(lab${id}_bench_${tree} ${LAB_BENCH})
      target_include_directories(lab${id}_bench_${tree} PRIVATE ${lab_dir} ${lab_dir}/bench)
      target_link_libraries(lab${id}_bench_${tree} PRIVATE lab${id}_${tree} labkit)
      target_compile_options(lab${id}_bench_${tree} PRIVATE "$<$<COMPILE_LANGUAGE:CUDA>:${LAB_CUDA_FLAGS}>")
    endif()
  endforeach()

  # Grading: the skeleton's objects and the recipe.
  _labkit_add_skeleton(${lab_dir} "${LAB_SOURCES}" lab${id}_skeleton lab${id}_grading skeleton_dir ${LAB_LIBS})
  target_compile_options(lab${id}_skeleton PRIVATE "$<$<COMPILE_LANGUAGE:CUDA>:-lineinfo;${LAB_CUDA_FLAGS}>")
  add_dependencies(lab${id}_grading lab${id}_gate_objs lab${id}_skeleton labkit_gates_main labkit_gates labkit)
  _labkit_write_recipe(OUTPUT ${CMAKE_BINARY_DIR}/grading/lab${id}.json ID ${id} NAME ${lab_name} LAB_DIR ${lab_dir}
                       SKELETON_DIR ${skeleton_dir} SOURCES ${LAB_SOURCES} GATE_OBJS lab${id}_gate_objs
                       SKELETON lab${id}_skeleton GRADING lab${id}_grading STUDENT_GATES lab${id}_gates_student
                       SOLUTION_GATES lab${id}_gates_solution LIBS ${LAB_LIBS} LAUNCHER ${LAB_LAUNCHER})
endfunction()
