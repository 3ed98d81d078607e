// An unmodified C++ program for `ickpt run` tests: every step four std::threads fold their
// quarter of a std::vector, the results go into a std::map that grows, and a line is written
// with an std::ofstream (its buffer is program memory, restored with it) to the file named by
// argv[1]. Threads are made and joined every step, so a checkpoint also lands while some are
// starting or ending. std::cout gets the final checksum once.
#include <chrono>
#include <cstdint>
#include <fstream>
#include <iostream>
#include <map>
#include <string>
#include <thread>
#include <vector>

static void spin(std::chrono::microseconds d) {
    auto end = std::chrono::steady_clock::now() + d;
    while (std::chrono::steady_clock::now() < end) {
    }
}

int main(int argc, char **argv) {
    if (argc < 3) {
        std::cerr << "usage: containers OUT STEPS\n";
        return 2;
    }
    std::ofstream out(argv[1], std::ios::trunc);
    if (!out) {
        std::cerr << "cannot open " << argv[1] << "\n";
        return 1;
    }
    long steps = std::stol(argv[2]);
    const size_t n = 1 << 16, workers = 4;
    std::vector<uint64_t> data(n);
    for (size_t i = 0; i < n; i++)
        data[i] = i * 0x9e3779b97f4a7c15ull;
    std::map<uint64_t, std::string> seen;
    uint64_t total = 0;
    for (long s = 0; s < steps; s++) {
        std::vector<uint64_t> part(workers);
        std::vector<std::thread> team;
        for (size_t w = 0; w < workers; w++)
            team.emplace_back([&, w] {
                uint64_t h = static_cast<uint64_t>(s);
                for (size_t i = w * n / workers; i < (w + 1) * n / workers; i++) {
                    data[i] = (data[i] ^ (data[i] >> 31)) * 0xbf58476d1ce4e5b9ull + h;
                    h = h * 31 + (data[i] >> 11);
                }
                part[w] = h;
                spin(std::chrono::microseconds(500));
            });
        for (auto &t : team)
            t.join();
        uint64_t h = 0;
        for (auto p : part)
            h = h * 1099511628211ull + p;
        seen[h % 1009] += std::to_string(s % 10);
        total = total * 31 + h + seen.size();
        out << "step " << s << ' ' << std::hex << h << std::dec << ' ' << seen.size() << '\n';
    }
    out.close();
    std::cout << "final " << std::hex << total << std::dec << " after " << steps << " steps, "
              << seen.size() << " keys" << std::endl;
    return 0;
}
