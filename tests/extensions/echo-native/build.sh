#!/bin/sh
# Builds echo-native next to its manifest for manual use (the lead's CMake build does the same).
cd "$(dirname "$0")" && g++ -O2 -std=c++20 echo.cpp -o echo-native
