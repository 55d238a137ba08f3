#pragma once
// Test helper: assert that a statement throws exception type T whose message contains
// every given fragment.

#include <gtest/gtest.h>

#include <string>

#define KILN_EXPECT_THROW_MSG(statement, ExceptionType, ...)                \
  do {                                                                      \
    try {                                                                   \
      statement;                                                            \
      ADD_FAILURE() << "expected " #ExceptionType " from: " #statement;     \
    } catch (const ExceptionType& kiln_e_) {                                \
      const std::string kiln_msg_ = kiln_e_.what();                         \
      for (const char* kiln_fragment_ : {__VA_ARGS__})                      \
        EXPECT_NE(kiln_msg_.find(kiln_fragment_), std::string::npos)        \
            << "message lacks \"" << kiln_fragment_ << "\": " << kiln_msg_; \
    }                                                                       \
  } while (0)
