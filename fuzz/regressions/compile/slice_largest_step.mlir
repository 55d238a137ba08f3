module attributes {kiln.device = "cpu:0", kiln.entry = @main} {
  func.func @main(%arg0: tensor<2x3xf32>) -> tensor<1x3xf32> {
    %0 = "kiln.slice"(%arg0) {starts = [0, 0], stops = [9223372036854775807, 9223372036854775807], steps = [9223372036854775807, 1]} : (tensor<2x3xf32>) -> tensor<1x3xf32>
    return %0 : tensor<1x3xf32>
  }
}
