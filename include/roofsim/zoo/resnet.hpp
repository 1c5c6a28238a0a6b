#pragma once
/// ResNet-50 v1.5 as torchvision builds it (torchvision.models.resnet50): the stride of a
/// downsampling bottleneck sits on its 3x3 convolution; ReLUs, 1000 classes, cross-entropy loss.

#include <roofsim/graph.hpp>

#include <string>

namespace roofsim::zoo {

namespace detail {
inline std::string conv_bn(GraphBuilder& b, const std::string& name, const std::string& in, std::int64_t c_in,
                           std::int64_t c_out, std::int64_t k, std::int64_t stride, bool relu) {
    std::string x = b.layer(name, "conv2d", {in},
                            {{"in_channels", c_in}, {"out_channels", c_out}, {"kernel_size", k}, {"stride", stride},
                             {"padding", k / 2}, {"bias", false}});
    x = b.layer(name + ".bn", "batchnorm2d", {x}, {{"num_features", c_out}});
    if (relu) x = b.layer(name + ".relu", "relu", {x}, {{"inplace", true}});
    return x;
}

inline std::string bottleneck(GraphBuilder& b, const std::string& name, const std::string& in, std::int64_t c_in,
                              std::int64_t width, std::int64_t stride) {
    const std::int64_t c_out = 4 * width;
    std::string y = conv_bn(b, name + ".conv1", in, c_in, width, 1, 1, true);
    y = conv_bn(b, name + ".conv2", y, width, width, 3, stride, true);
    y = conv_bn(b, name + ".conv3", y, width, c_out, 1, 1, false);
    std::string shortcut = in;
    if (stride != 1 || c_in != c_out) shortcut = conv_bn(b, name + ".downsample", in, c_in, c_out, 1, stride, false);
    y = b.layer(name + ".add", "add", {y, shortcut});
    return b.layer(name + ".relu", "relu", {y}, {{"inplace", true}});
}
}  // namespace detail

/// torchvision resnet50 at image_size x image_size, `classes` outputs.
[[nodiscard]] inline Graph resnet50(std::int64_t image_size = 224, std::int64_t classes = 1000) {
    GraphBuilder b("resnet50");
    std::string x = b.input("images", {GraphBuilder::batch, 3, image_size, image_size});
    const std::string labels = b.input("labels", {GraphBuilder::batch}, DType::i64);
    x = detail::conv_bn(b, "conv1", x, 3, 64, 7, 2, true);
    x = b.layer("maxpool", "maxpool2d", {x}, {{"kernel_size", std::int64_t(3)}, {"stride", std::int64_t(2)}, {"padding", std::int64_t(1)}});
    std::int64_t c_in = 64;
    const std::int64_t blocks[] = {3, 4, 6, 3};
    for (int stage = 0; stage < 4; ++stage) {
        const std::int64_t width = 64 << stage;
        for (std::int64_t i = 0; i < blocks[stage]; ++i) {
            const std::int64_t stride = (stage > 0 && i == 0) ? 2 : 1;
            x = detail::bottleneck(b, "layer" + std::to_string(stage + 1) + "." + std::to_string(i), x, c_in, width, stride);
            c_in = 4 * width;
        }
    }
    x = b.layer("avgpool", "adaptive_avgpool2d", {x}, {{"output_size", std::int64_t(1)}});
    x = b.layer("flatten", "flatten", {x}, {{"start_dim", std::int64_t(1)}});
    x = b.layer("fc", "linear", {x}, {{"in_features", c_in}, {"out_features", classes}});
    b.layer("loss", "cross_entropy", {x, labels});
    return std::move(b).build();
}

}  // namespace roofsim::zoo
